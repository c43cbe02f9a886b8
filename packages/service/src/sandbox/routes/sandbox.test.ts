import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { chmod, mkdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPostgres } from "@gw/core/postgres";
import { type BareRepositories, bareRepositories, git } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const remotesDir = mkdtempSync(join(tmpdir(), "gw-sandbox-remotes-"));
const sandboxRoot = mkdtempSync(join(tmpdir(), "gw-sandbox-root-"));
const repositoriesDir = mkdtempSync(join(tmpdir(), "gw-sandbox-repositories-"));
const dataDir = mkdtempSync(join(tmpdir(), "gw-sandbox-data-"));
const logs: string[] = [];
const stack = useStack(
  {
    GIT_BASE_URL: `file://${remotesDir}`,
    SANDBOX_ROOT: sandboxRoot,
    SANDBOX_GIT_DIR: repositoriesDir,
    DATA_DIR: dataDir,
    SANDBOX_GIT_AUTHOR: "Sandbox Bot <bot@sandbox.test>",
  },
  {},
  logs,
);
const SANDBOX = "/api/v1/sandbox";
const RESULT_FIELDS = [
  "session_id",
  "assignment_generation",
  "repository_id",
  "owner",
  "repository",
  "branch",
  "remote_head_sha",
  "no_changes",
];
/** Every token stored in this file: none may ever reach a log line. */
const tokens: string[] = [];
let remotes: BareRepositories;
let mainHead: string;

beforeAll(async () => {
  remotes = await bareRepositories(remotesDir);
  await remotes.create("acme", "widgets", { "README.md": "# widgets\n", "src/index.ts": "export {};\n" });
  mainHead = (await remotes.branchHead("acme", "widgets", "main"))!;
});

afterAll(async () => {
  await remotes.remove();
  await rm(sandboxRoot, { recursive: true, force: true });
  await rm(repositoriesDir, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
});

/** Where the service keeps session `id`'s repository: its git directory, outside the workspace. */
const repositoryOf = (id: string) => join(repositoriesDir, `${id}.git`);

const newToken = () => {
  const token = `ghp_${randomBytes(18).toString("hex")}`;
  tokens.push(token);
  return token;
};

/** A key in a fresh organization, alice's stored connection, and a session of acme/<repository>. */
async function setup(repository = "widgets") {
  const key = await stack.createKey();
  const user = "alice";
  const token = newToken();
  const stored = await stack.call(key.secret, `${SANDBOX}/connections/github`, {
    method: "PUT",
    json: { token },
    user,
  });
  expect(stored.status).toBe(204);
  const created = await stack.call(key.secret, `${SANDBOX}/sessions`, {
    json: { owner: "acme", repository, repository_id: 42 },
    user,
  });
  expect(created.status).toBe(200);
  const session = await created.json();
  const call = (path: string, init: { method?: string; json?: unknown; user?: string } = {}) =>
    stack.call(key.secret, `${SANDBOX}/sessions/${session.id}${path}`, { user, ...init });
  const assign = async (): Promise<number> => {
    const res = await call("/assignments", { method: "POST" });
    expect(res.status).toBe(200);
    return (await res.json()).assignment_generation;
  };
  const push = (json: unknown, as = user) => call("/github/push", { method: "POST", json, user: as });
  const workspace = join(sandboxRoot, session.id);
  return { key, user, token, session, call, assign, push, workspace, repository: repositoryOf(session.id) };
}

describe("stored connections", () => {
  it("are per principal, shown only as connected or not, encrypted at rest, and deletable", async () => {
    const key = await stack.createKey();
    const connection = (user: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, `${SANDBOX}/connections/github`, { user, ...init });
    expect(await (await connection("alice")).json()).toEqual({ connected: false, updated_at: null });
    const token = newToken();
    const put = await connection("alice", { method: "PUT", json: { token } });
    expect(put.status).toBe(204);
    expect(await put.text()).toBe("");
    const shown = await connection("alice");
    const body = await shown.text();
    expect(JSON.parse(body)).toEqual({ connected: true, updated_at: expect.any(Number) });
    expect(Math.abs(JSON.parse(body).updated_at - Date.now() / 1000)).toBeLessThan(60);
    expect(body).not.toContain(token);
    // X-On-Behalf-Of makes it the end user's: bob has none.
    expect(await (await connection("bob")).json()).toEqual({ connected: false, updated_at: null });

    const db = createPostgres(stack.database.url, { connectionName: "test" });
    const { rows } = await db
      .query("SELECT * FROM sandbox_connections WHERE org = $1", [key.org])
      .finally(() => db.close());
    expect(rows).toHaveLength(1);
    const raw = JSON.stringify(rows[0]);
    expect(raw).toContain(key.org);
    expect(raw).not.toContain(token);
    expect(raw).not.toContain(Buffer.from(token).toString("base64"));
    expect(raw).not.toContain(Buffer.from(token).toString("hex"));

    expect((await connection("alice", { method: "DELETE" })).status).toBe(204);
    expect(await (await connection("alice")).json()).toEqual({ connected: false, updated_at: null });
  });

  it("are sealed by the vault: no key of their own is made in DATA_DIR when SANDBOX_CONNECTION_KEY is unset", async () => {
    const key = await stack.createKey();
    const token = newToken();
    const put = await stack.call(key.secret, `${SANDBOX}/connections/github`, {
      method: "PUT",
      json: { token },
      user: "alice",
    });
    expect(put.status).toBe(204);
    const db = createPostgres(stack.database.url, { connectionName: "test" });
    const { rows } = await db
      .query(
        "SELECT kek_id, wrapped_key, sealed, nonce, ciphertext, tag FROM sandbox_connections WHERE org = $1",
        [key.org],
      )
      .finally(() => db.close());
    expect(rows).toEqual([
      {
        kek_id: expect.any(String),
        wrapped_key: expect.any(Buffer),
        sealed: expect.any(Buffer),
        nonce: null,
        ciphertext: null,
        tag: null,
      },
    ]);
    expect(existsSync(join(dataDir, "sandbox-connection-key"))).toBe(false);
    expect(logs.join("")).not.toMatch(/SANDBOX_CONNECTION_KEY/);
  });

  it.each([
    ["no token", {}, ["body.token:missing"]],
    ["an empty token", { token: "" }, ["body.token:string_too_short"]],
    ["a token over 4096 characters", { token: "x".repeat(4097) }, ["body.token:string_too_long"]],
    ["a token with a space", { token: "ghp_has space" }, ["body.token:string_pattern_mismatch"]],
    ["a token with U+0000", { token: "ghp_nul\u0000x" }, ["body.token:string_pattern_mismatch"]],
    [
      "a number and an extra field",
      { token: 5, extra: 1 },
      ["body.extra:extra_forbidden", "body.token:string_type"],
    ],
    ["a misspelt field", { tokn: "ghp_misspelt" }, ["body.token:missing", "body.tokn:extra_forbidden"]],
  ])("refuses %s with 422, never echoing the token", async (_name, json, expected) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, `${SANDBOX}/connections/github`, { method: "PUT", json });
    expect(res.status).toBe(422);
    const text = await res.text();
    const { detail } = JSON.parse(text);
    expect(detail.map((d: { loc: string[]; type: string }) => `${d.loc.join(".")}:${d.type}`).sort()).toEqual(
      expected,
    );
    expect(detail.filter((d: object) => "input" in d)).toEqual([]);
    expect(text).not.toContain("ghp_");
  });
});

describe("sessions", () => {
  it("clone the repository, its files into the workspace, and answer the session; assignments increment its generation", async () => {
    const { session, call, assign, workspace, repository } = await setup();
    expect(session).toEqual({
      id: expect.stringMatching(/^sess_[0-9a-f]{32}$/),
      object: "sandbox.session",
      owner: "acme",
      repository: "widgets",
      repository_id: 42,
      assignment_generation: 0,
      created_at: expect.any(Number),
    });
    expect(Object.keys(session)).toEqual([
      "id",
      "object",
      "owner",
      "repository",
      "repository_id",
      "assignment_generation",
      "created_at",
    ]);
    expect(await readFile(join(workspace, "README.md"), "utf8")).toBe("# widgets\n");
    // The workspace holds the files only; the repository is the service's, elsewhere.
    expect(existsSync(join(workspace, ".git"))).toBe(false);
    expect(await git(["--git-dir", repository, "rev-parse", "HEAD"])).toBe(mainHead);
    // The clone URL carries no credential.
    expect(await git(["--git-dir", repository, "remote", "get-url", "origin"])).toBe(
      `file://${remotesDir}/acme/widgets.git`,
    );

    expect(await (await call("")).json()).toEqual(session);
    expect(await assign()).toBe(1);
    expect(await assign()).toBe(2);
    expect(await (await call("")).json()).toEqual({ ...session, assignment_generation: 2 });
  });

  it("start at the given ref", async () => {
    const other = await remotes.clone("acme", "widgets");
    await git(["checkout", "--quiet", "-b", "release"], other);
    await writeFile(join(other, "RELEASE"), "1.0\n");
    await git(["add", "--all"], other);
    await git(["commit", "--quiet", "-m", "release"], other);
    await git(["push", "--quiet", "origin", "release"], other);
    const key = await stack.createKey();
    await stack.call(key.secret, `${SANDBOX}/connections/github`, {
      method: "PUT",
      json: { token: newToken() },
    });
    const res = await stack.call(key.secret, `${SANDBOX}/sessions`, {
      json: { owner: "acme", repository: "widgets", repository_id: 42, ref: "release" },
    });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    expect(await readFile(join(sandboxRoot, id, "RELEASE"), "utf8")).toBe("1.0\n");
  });

  it("generations increment atomically: concurrent assignments get distinct numbers", async () => {
    const { assign } = await setup();
    const generations = await Promise.all(Array.from({ length: 8 }, () => assign()));
    expect(generations.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("are deleted with their workspace and repository", async () => {
    const { session, call, workspace, repository } = await setup();
    expect(existsSync(workspace)).toBe(true);
    expect(existsSync(repository)).toBe(true);
    const res = await call("", { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: session.id, object: "sandbox.session.deleted", deleted: true });
    expect(existsSync(workspace)).toBe(false);
    expect(existsSync(repository)).toBe(false);
    expect((await call("")).status).toBe(404);
    expect((await call("/github/push", { json: { assignment_generation: 1, branch: "x" } })).status).toBe(
      404,
    );
  });

  it.each([
    [{}, ["body.owner:missing", "body.repository:missing", "body.repository_id:missing"]],
    [
      { owner: "../etc", repository: "..", repository_id: 0 },
      [
        "body.owner:string_pattern_mismatch",
        "body.repository:value_error",
        "body.repository_id:greater_than_equal",
      ],
    ],
    [
      { owner: "acme", repository: "a/b", repository_id: "1", ref: "--upload-pack=x" },
      ["body.ref:value_error", "body.repository:string_pattern_mismatch", "body.repository_id:int_type"],
    ],
  ])("refuse %j with 422", async (json, expected) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, `${SANDBOX}/sessions`, { json });
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail.map((d: { loc: string[]; type: string }) => `${d.loc.join(".")}:${d.type}`).sort()).toEqual(
      expected,
    );
  });

  it("need a stored connection (409), and a repository the remote has (502)", async () => {
    const key = await stack.createKey();
    const create = (repository: string) =>
      stack.call(key.secret, `${SANDBOX}/sessions`, {
        json: { owner: "acme", repository, repository_id: 7 },
      });
    const missing = await create("widgets");
    expect(missing.status).toBe(409);
    expect(await missing.json()).toEqual({
      error: "Conflict",
      message: expect.stringContaining("PUT /api/v1/sandbox/connections/github"),
      code: "no_connection",
    });
    await stack.call(key.secret, `${SANDBOX}/connections/github`, {
      method: "PUT",
      json: { token: newToken() },
    });
    const unknown = await create("no-such-repository");
    expect(unknown.status).toBe(502);
    expect(await unknown.json()).toEqual({
      error: "Bad Gateway",
      message: "git clone failed: the remote has no such repository",
      code: "remote_failed",
    });
  });
});

describe("push", () => {
  it("pushes a new branch, then reports no changes, then commits and pushes an edit", async () => {
    const { session, assign, push, workspace, repository } = await setup();
    expect(await assign()).toBe(1);

    const first = await push({ assignment_generation: 1, branch: "feature/one" });
    expect(first.status).toBe(200);
    const firstBody = await first.json();
    expect(firstBody).toEqual({
      session_id: session.id,
      assignment_generation: 1,
      repository_id: 42,
      owner: "acme",
      repository: "widgets",
      branch: "feature/one",
      remote_head_sha: mainHead,
      no_changes: false,
    });
    expect(Object.keys(firstBody)).toEqual(RESULT_FIELDS);
    expect(await remotes.branchHead("acme", "widgets", "feature/one")).toBe(mainHead);

    const second = await push({
      assignment_generation: 1,
      branch: "feature/one",
      checkout_path: "",
      force: false,
    });
    expect(await second.json()).toEqual({ ...firstBody, no_changes: true });

    await writeFile(join(workspace, "README.md"), "# widgets, edited\n");
    await writeFile(join(workspace, "src", "added.ts"), "export const added = 1;\n");
    await rm(join(workspace, "src", "index.ts"));
    // Ignored files stay out.
    await writeFile(join(workspace, ".gitignore"), "local-notes.txt\n");
    await writeFile(join(workspace, "local-notes.txt"), "not for the commit\n");
    const third = await push({ assignment_generation: 1, branch: "feature/one" });
    expect(third.status).toBe(200);
    const thirdBody = await third.json();
    expect(thirdBody).toEqual({ ...firstBody, remote_head_sha: expect.stringMatching(/^[0-9a-f]{40}$/) });
    const sha = thirdBody.remote_head_sha;
    expect(sha).not.toBe(mainHead);
    expect(await remotes.branchHead("acme", "widgets", "feature/one")).toBe(sha);

    const bare = join(remotesDir, "acme", "widgets.git");
    expect(await git(["--git-dir", bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%P", sha])).toBe(
      `Sandbox Bot <bot@sandbox.test>|Sandbox Bot <bot@sandbox.test>|Sandbox session ${session.id}, assignment 1|${mainHead}`,
    );
    expect(await git(["--git-dir", bare, "show", `${sha}:README.md`])).toBe("# widgets, edited");
    expect(await git(["--git-dir", bare, "ls-tree", "-r", "--name-only", sha])).toBe(
      ".gitignore\nREADME.md\nsrc/added.ts",
    );
    // The session's branch moved to the commit.
    expect(await git(["--git-dir", repository, "rev-parse", "HEAD"])).toBe(sha);

    const again = await push({ assignment_generation: 1, branch: "feature/one" });
    expect(await again.json()).toEqual({ ...thirdBody, no_changes: true });
  });

  it("refuses a non-fast-forward with 409 and git's reason, and forces it when asked", async () => {
    const { assign, push, workspace, repository } = await setup();
    await assign();
    expect((await push({ assignment_generation: 1, branch: "contested" })).status).toBe(200);

    // Someone else moves the branch on.
    const other = await remotes.clone("acme", "widgets");
    await git(["checkout", "--quiet", "contested"], other);
    await writeFile(join(other, "THEIRS"), "theirs\n");
    await git(["add", "--all"], other);
    await git(["commit", "--quiet", "-m", "theirs"], other);
    await git(["push", "--quiet", "origin", "contested"], other);
    const theirs = await git(["rev-parse", "HEAD"], other);

    await writeFile(join(workspace, "OURS"), "ours\n");
    const refused = await push({ assignment_generation: 1, branch: "contested" });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(
        /^The remote refused to update branch 'contested': \[rejected\] \(fetch first\)/,
      ),
      code: "push_rejected",
    });
    expect(await remotes.branchHead("acme", "widgets", "contested")).toBe(theirs);

    const forced = await push({ assignment_generation: 1, branch: "contested", force: true });
    expect(forced.status).toBe(200);
    const ours = await git(["--git-dir", repository, "rev-parse", "HEAD"]);
    expect(await forced.json()).toMatchObject({ remote_head_sha: ours, no_changes: false });
    expect(await remotes.branchHead("acme", "widgets", "contested")).toBe(ours);
  });

  it("a refusal that quotes the remote's own error keeps a local remote's path out of it", async () => {
    const { assign, push } = await setup();
    await assign();
    // Within the contract's 255 characters, but longer than a file name on the remote's disk.
    const refused = await push({ assignment_generation: 1, branch: "b".repeat(255) });
    expect(refused.status).toBe(409);
    const body = await refused.json();
    expect(body.code).toBe("push_rejected");
    expect(body.message).toMatch(/^The remote refused to update branch 'b+': /);
    expect(body.message).not.toContain(remotesDir);
  });

  it("is fenced by the assignment generation: 409 naming the current one", async () => {
    const { push, assign } = await setup();
    const before = await push({ assignment_generation: 1, branch: "fenced" });
    expect(before.status).toBe(409);
    expect((await before.json()).message).toMatch(/current assignment_generation is 0/);
    await assign();
    await assign();
    for (const stale of [1, 3]) {
      const res = await push({ assignment_generation: stale, branch: "fenced" });
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual({
        error: "Conflict",
        message: `assignment_generation ${stale} is not the session's current assignment; the current assignment_generation is 2`,
        code: "stale_assignment",
      });
    }
    expect(await remotes.branchHead("acme", "widgets", "fenced")).toBeUndefined();
    expect((await push({ assignment_generation: 2, branch: "fenced" })).status).toBe(200);
  });

  it("commits the directory at checkout_path as the repository's root, e.g. a copy nested in the workspace", async () => {
    const { push, assign, workspace, repository } = await setup();
    await assign();
    const nested = join(workspace, "libs", "nested");
    await mkdir(join(workspace, "libs"));
    // The agent cloned the repository once more, with its own .git, and changed a file there.
    await git(["clone", "--quiet", join(remotesDir, "acme", "widgets.git"), nested]);
    await writeFile(join(nested, "NESTED"), "nested\n");
    const res = await push({ assignment_generation: 1, branch: "from-nested", checkout_path: "libs/nested" });
    expect(res.status).toBe(200);
    const { remote_head_sha: sha } = await res.json();
    const bare = join(remotesDir, "acme", "widgets.git");
    expect(await remotes.branchHead("acme", "widgets", "from-nested")).toBe(sha);
    // The files of libs/nested, on top of the session's history; its own .git is the agent's and stays out.
    expect(await git(["--git-dir", bare, "rev-parse", `${sha}^`])).toBe(mainHead);
    expect(await git(["--git-dir", bare, "ls-tree", "-r", "--name-only", sha])).toBe(
      "NESTED\nREADME.md\nsrc/index.ts",
    );
    expect(await git(["--git-dir", repository, "rev-parse", "HEAD"])).toBe(sha);
    expect(await git(["rev-parse", "HEAD"], nested)).toBe(mainHead);

    const missing = await push({
      assignment_generation: 1,
      branch: "from-nested",
      checkout_path: "no/such/dir",
    });
    expect(missing.status).toBe(409);
    expect((await missing.json()).message).toBe(
      "No directory at checkout_path 'no/such/dir' in the workspace: no such directory",
    );
    // From the workspace's root (or libs), libs/nested is a repository inside the tree: refused, not recorded.
    for (const path of ["", "libs"]) {
      const nestedRepo = await push({ assignment_generation: 1, branch: "with-nested", checkout_path: path });
      expect(nestedRepo.status).toBe(409);
      expect((await nestedRepo.json()).message).toMatch(
        /holds a nested git repository at '(libs\/)?nested': a push commits files only/,
      );
    }
    expect(await remotes.branchHead("acme", "widgets", "with-nested")).toBeUndefined();
  });

  it("runs nothing the workspace's repository configures, and goes only to the session's repository", async () => {
    const { push, assign, workspace } = await setup();
    await assign();
    // The agent makes a repository of its own in the workspace and configures it.
    await git(["init", "--quiet", workspace]);
    const marker = (name: string) => join(dataDir, `${name}-${randomBytes(4).toString("hex")}`);
    const markers = { filter: marker("filter"), fsmonitor: marker("fsmonitor"), hook: marker("hook") };
    const script = join(workspace, "touch.sh");
    await writeFile(script, `#!/bin/sh\ntouch "$1"\n`, { mode: 0o755 });
    await git(["config", "filter.evil.clean", `${script} ${markers.filter}; cat`], workspace);
    await git(["config", "filter.evil.required", "true"], workspace);
    await writeFile(join(workspace, ".gitattributes"), "* filter=evil\n");
    const monitor = join(workspace, "monitor.sh");
    await writeFile(monitor, `#!/bin/sh\ntouch ${markers.fsmonitor}\n`, { mode: 0o755 });
    await git(["config", "core.fsmonitor", monitor], workspace);
    for (const hook of ["pre-commit", "reference-transaction", "pre-push", "post-commit"]) {
      await writeFile(join(workspace, ".git", "hooks", hook), `#!/bin/sh\ntouch ${markers.hook}\n`);
      await chmod(join(workspace, ".git", "hooks", hook), 0o755);
    }
    // Rewrites that would send the push (and a token) elsewhere.
    const decoy = await bareRepositories();
    await decoy.create("acme", "widgets");
    await git(["config", `url.file://${decoy.root}/.insteadOf`, `file://${remotesDir}/`], workspace);
    await git(["config", "remote.origin.url", `file://${decoy.root}/acme/widgets.git`], workspace);

    const res = await push({ assignment_generation: 1, branch: "guarded" });
    expect(res.status).toBe(200);
    const { remote_head_sha } = await res.json();
    expect(await remotes.branchHead("acme", "widgets", "guarded")).toBe(remote_head_sha);
    expect(await decoy.branchHead("acme", "widgets", "guarded")).toBeUndefined();
    for (const path of Object.values(markers)) expect(existsSync(path)).toBe(false);
    await decoy.remove();
  });

  const B = { assignment_generation: 1, branch: "x" };
  // One assigned session, with a symlink out of its workspace, for every case below: a refused push
  // changes nothing, so each case needs no session of its own.
  let refusing: ReturnType<typeof setup> | undefined;
  const refusingSession = () =>
    (refusing ??= (async () => {
      const session = await setup();
      await session.assign();
      await symlink(tmpdir(), join(session.workspace, "escape"));
      return session;
    })());
  it.each([
    ["no body", undefined, ["body:missing"]],
    ["an empty object", {}, ["body.assignment_generation:missing", "body.branch:missing"]],
    [
      "a generation as a string",
      { ...B, assignment_generation: "1" },
      ["body.assignment_generation:int_type"],
    ],
    [
      "a fractional generation",
      { ...B, assignment_generation: 1.5 },
      ["body.assignment_generation:int_type"],
    ],
    ["an empty branch", { ...B, branch: "" }, ["body.branch:string_too_short"]],
    ["a branch over 255 characters", { ...B, branch: "b".repeat(256) }, ["body.branch:string_too_long"]],
    ["a branch that is a number", { ...B, branch: 7 }, ["body.branch:string_type"]],
    ["branch --upload-pack=…", { ...B, branch: "--upload-pack=touch /tmp/x" }, ["body.branch:value_error"]],
    ["branch -b", { ...B, branch: "-b" }, ["body.branch:value_error"]],
    ["branch a..b", { ...B, branch: "a..b" }, ["body.branch:value_error"]],
    ["branch feature/", { ...B, branch: "feature/" }, ["body.branch:value_error"]],
    ["branch HEAD", { ...B, branch: "HEAD" }, ["body.branch:value_error"]],
    ["a branch with a space", { ...B, branch: "has space" }, ["body.branch:value_error"]],
    ["branch x.lock", { ...B, branch: "x.lock" }, ["body.branch:value_error"]],
    ["branch @{-1}", { ...B, branch: "@{-1}" }, ["body.branch:value_error"]],
    [
      "a checkout_path over 512",
      { ...B, checkout_path: "p".repeat(513) },
      ["body.checkout_path:string_too_long"],
    ],
    [
      "a checkout_path name over 255 bytes (64 emoji)",
      { ...B, checkout_path: "😀".repeat(64) },
      ["body.checkout_path:value_error"],
    ],
    [
      "a checkout_path whose last name is over 255 bytes",
      { ...B, checkout_path: `d/${"p".repeat(256)}` },
      ["body.checkout_path:value_error"],
    ],
    ["checkout_path ../x", { ...B, checkout_path: "../x" }, ["body.checkout_path:value_error"]],
    ["checkout_path a/../../x", { ...B, checkout_path: "a/../../x" }, ["body.checkout_path:value_error"]],
    ["checkout_path /etc", { ...B, checkout_path: "/etc" }, ["body.checkout_path:value_error"]],
    ["a symlink out", { ...B, checkout_path: "escape" }, ["body.checkout_path:value_error"]],
    [
      "a path through a symlink out",
      { ...B, checkout_path: "escape/deeper" },
      ["body.checkout_path:value_error"],
    ],
    ["a checkout_path that is a number", { ...B, checkout_path: 3 }, ["body.checkout_path:string_type"]],
    ["force as a string", { ...B, force: "yes" }, ["body.force:bool_type"]],
    ["an extra field", { ...B, remote: "elsewhere" }, ["body.remote:extra_forbidden"]],
  ])("refuses %s with 422", async (_name, json, expected) => {
    const { push } = await refusingSession();
    const res = await push(json);
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail.map((d: { loc: string[]; type: string }) => `${d.loc.join(".")}:${d.type}`).sort()).toEqual(
      expected,
    );
  });

  it("lists every problem at once, in field order, with pydantic's types, messages and context", async () => {
    const { push, assign, session } = await setup();
    await assign();
    const marker = join(dataDir, `upload-pack-${randomBytes(4).toString("hex")}`);
    const res = await push({
      assignment_generation: 0,
      branch: `--upload-pack=touch ${marker}`,
      checkout_path: "/etc",
      force: "yes",
      remote: "x",
    });
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail).toEqual([
      {
        loc: ["body", "assignment_generation"],
        msg: "Input should be greater than or equal to 1",
        type: "greater_than_equal",
        input: 0,
        ctx: { ge: 1 },
      },
      {
        loc: ["body", "branch"],
        msg: expect.stringMatching(/^Value error, /),
        type: "value_error",
        input: `--upload-pack=touch ${marker}`,
      },
      {
        loc: ["body", "checkout_path"],
        msg: "Value error, checkout_path must be relative to the workspace",
        type: "value_error",
        input: "/etc",
      },
      { loc: ["body", "force"], msg: "Input should be a valid boolean", type: "bool_type", input: "yes" },
      {
        loc: ["body", "remote"],
        msg: "Extra inputs are not permitted",
        type: "extra_forbidden",
        input: "x",
      },
    ]);
    expect(existsSync(marker)).toBe(false);
    expect(await git(["--git-dir", repositoryOf(session.id), "rev-parse", "HEAD"])).toBe(mainHead);
  });

  it("answers 404 for another user's or organization's session and for unknown ids", async () => {
    const { session, key, push, call } = await setup();
    const body = { assignment_generation: 1, branch: "x" };
    const strangers = [
      { secret: key.secret, user: "bob" },
      { secret: key.secret, user: undefined }, // the key's owner is not alice either
      { secret: (await stack.createKey()).secret, user: "alice" }, // another organization's alice
    ];
    for (const { secret, user } of strangers) {
      const as = (path: string, init: { method?: string; json?: unknown } = {}) =>
        stack.call(secret, `${SANDBOX}/sessions/${session.id}${path}`, {
          ...init,
          ...(user ? { user } : {}),
        });
      for (const res of [
        await as(""),
        await as("/assignments", { method: "POST" }),
        await as("/github/push", { json: body }),
        await as("", { method: "DELETE" }),
      ]) {
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({
          error: "Not Found",
          message: `No sandbox session ${session.id}`,
          code: "session_not_found",
        });
      }
    }
    for (const id of [`sess_${"0".repeat(32)}`, "not-a-session", "..%2F..%2Fetc"]) {
      expect(
        (await stack.call(key.secret, `${SANDBOX}/sessions/${id}/github/push`, { json: body, user: "alice" }))
          .status,
      ).toBe(404);
    }
    expect(await (await call("")).json()).toMatchObject({ id: session.id, assignment_generation: 0 });
    expect((await push(body)).status).toBe(409); // alice's own: only stale
  });

  it("needs the session's repository: 409 saying to create a new session when the service holds none", async () => {
    const { push, assign, repository } = await setup();
    await assign();
    await rm(repository, { recursive: true, force: true });
    const res = await push({ assignment_generation: 1, branch: "no-repository" });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(
        /^The service holds no repository for this session .*create a new session$/,
      ),
      code: "repository_missing",
    });
    expect(await remotes.branchHead("acme", "widgets", "no-repository")).toBeUndefined();
  });

  it("is not blocked by an index lock a push that died left in the session's repository", async () => {
    const { push, assign, workspace, repository } = await setup();
    await assign();
    await writeFile(join(repository, "index.lock"), "");
    await writeFile(join(workspace, "AFTER-CRASH"), "x\n");
    const res = await push({ assignment_generation: 1, branch: "after-crash" });
    expect(res.status).toBe(200);
    expect(existsSync(join(repository, "index.lock"))).toBe(false);
  });

  it("needs a stored connection: 409 saying to store one", async () => {
    const { key, push, assign } = await setup();
    await assign();
    await stack.call(key.secret, `${SANDBOX}/connections/github`, { method: "DELETE", user: "alice" });
    const res = await push({ assignment_generation: 1, branch: "x" });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: "Conflict",
      message:
        "No GitHub connection is stored for this user; store one with PUT /api/v1/sandbox/connections/github",
      code: "no_connection",
    });
  });

  it("answers 502 naming the failure in its own words when the remote is gone; git's output goes only to the log", async () => {
    // git's error output names the remote's path, and with it this marker.
    const marker = `vanishing-${randomBytes(6).toString("hex")}`;
    await remotes.create("acme", marker);
    const { push, assign, token } = await setup(marker);
    await assign();
    await rename(join(remotesDir, "acme", `${marker}.git`), join(remotesDir, "acme", `gone-${marker}.git`));
    const res = await push({ assignment_generation: 1, branch: "x" });
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({
      error: "Bad Gateway",
      message: "git push failed: the remote has no such repository",
      code: "remote_failed",
    });
    for (const absent of [marker, remotesDir, "does not appear", "fatal", token])
      expect(text).not.toContain(absent);
    const logged = logs.find(
      (line) => line.includes("git could not use the remote") && line.includes(marker),
    );
    expect(logged).toContain("does not appear to be a git repository");
    expect(logged).not.toContain(token);
  });

  it("needs sandbox:write to change anything; sandbox:read reads", async () => {
    const { session } = await setup();
    const reader = await stack.createKey({ permissions: ["sandbox:read"] });
    const as = (path: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(reader.secret, `${SANDBOX}${path}`, init);
    expect((await as("/connections/github")).status).toBe(200);
    for (const res of [
      await as("/connections/github", { method: "PUT", json: { token: "t" } }),
      await as("/connections/github", { method: "DELETE" }),
      await as("/sessions", { json: { owner: "acme", repository: "widgets", repository_id: 1 } }),
      await as(`/sessions/${session.id}/assignments`, { method: "POST" }),
      await as(`/sessions/${session.id}/github/push`, { json: { assignment_generation: 1, branch: "x" } }),
      await as(`/sessions/${session.id}`, { method: "DELETE" }),
    ]) {
      expect(res.status).toBe(403);
      expect((await res.json()).message).toContain("sandbox:write");
    }
    const none = await stack.createKey({ permissions: ["responses:read"] });
    expect((await stack.call(none.secret, `${SANDBOX}/connections/github`)).status).toBe(403);
  });

  it("never logs a token", () => {
    const text = logs.join("");
    expect(text).toContain("session pushed");
    for (const token of tokens) expect(text).not.toContain(token);
  });
});
