/**
 * A push sends only what its own session holds. The agent of a session can
 * write anything in its workspace, a `.git` there included; whatever it puts
 * there (alternates, symlinked refs, a `gitdir:` file, `commondir`), a push
 * of session A never carries an object of session B, which belongs to
 * another organization.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { type BareRepositories, bareRepositories, git } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const remotesDir = mkdtempSync(join(tmpdir(), "gw-isolation-remotes-"));
const sandboxRoot = mkdtempSync(join(tmpdir(), "gw-isolation-root-"));
const repositoriesDir = mkdtempSync(join(tmpdir(), "gw-isolation-repositories-"));
const dataDir = mkdtempSync(join(tmpdir(), "gw-isolation-data-"));
const stack = useStack({
  GIT_BASE_URL: `file://${remotesDir}`,
  SANDBOX_ROOT: sandboxRoot,
  SANDBOX_GIT_DIR: repositoriesDir,
  DATA_DIR: dataDir,
});
const SANDBOX = "/api/v1/sandbox";

/** Where the service keeps session `id`'s repository (its git directory). */
const repositoryOf = (id: string) => join(repositoriesDir, `${id}.git`);

let remotes: BareRepositories;
let mainHead: string;
/** Session B, of organization globex, after it pushed its secret. */
const b = { id: "", workspace: "", repository: "", secret: "", secretCommit: "" };
/** Every object reachable in globex's remote and B's repository that acme's remote did not hold. */
let onlyB: Set<string>;

const objects = async (gitDir: string) =>
  new Set(
    (await git(["--git-dir", gitDir, "rev-list", "--objects", "--all"]))
      .split("\n")
      .filter(Boolean)
      .map((line) => line.slice(0, 40)),
  );
const acmeRemote = () => join(remotesDir, "acme", "widgets.git");

/** A key of a fresh organization with `user`'s connection stored, and a session of owner/repository. */
async function session(owner: string, repository: string, token = `ghp_${randomBytes(18).toString("hex")}`) {
  const key = await stack.createKey();
  const user = "alice";
  const stored = await stack.call(key.secret, `${SANDBOX}/connections/github`, {
    method: "PUT",
    json: { token },
    user,
  });
  expect(stored.status).toBe(204);
  const created = await stack.call(key.secret, `${SANDBOX}/sessions`, {
    json: { owner, repository, repository_id: 1 },
    user,
  });
  expect(created.status).toBe(200);
  const { id } = await created.json();
  const call = (path: string, json?: unknown) =>
    stack.call(key.secret, `${SANDBOX}/sessions/${id}${path}`, { method: "POST", json, user });
  expect((await call("/assignments")).status).toBe(200);
  const push = (branch: string) => call("/github/push", { assignment_generation: 1, branch });
  return { id, token, push, workspace: join(sandboxRoot, id) };
}

beforeAll(async () => {
  remotes = await bareRepositories(remotesDir);
  await remotes.create("acme", "widgets", { "README.md": "# widgets\n", "src/index.ts": "export {};\n" });
  await remotes.create("globex", "vault", { "VAULT.md": "# globex's vault\n" });
  mainHead = (await remotes.branchHead("acme", "widgets", "main"))!;

  const victim = await session("globex", "vault");
  b.id = victim.id;
  b.workspace = victim.workspace;
  b.repository = repositoryOf(victim.id);
  b.secret = `globex-secret-${randomBytes(16).toString("hex")}`;
  await writeFile(join(b.workspace, "secret.txt"), `${b.secret}\n`);
  const pushed = await victim.push("private");
  expect(pushed.status).toBe(200);
  b.secretCommit = (await pushed.json()).remote_head_sha;
  // B's own branch now holds the secret commit.
  expect(await git(["--git-dir", b.repository, "rev-parse", "refs/heads/main"])).toBe(b.secretCommit);

  const acme = await objects(acmeRemote());
  onlyB = new Set(
    [...(await objects(join(remotesDir, "globex", "vault.git"))), ...(await objects(b.repository))].filter(
      (o) => !acme.has(o),
    ),
  );
  expect(onlyB.has(b.secretCommit)).toBe(true);
});

afterAll(async () => {
  await remotes.remove();
  for (const dir of [sandboxRoot, repositoriesDir, dataDir]) await rm(dir, { recursive: true, force: true });
});

/** The agent's own `.git` in A's workspace: the service's clone's if it left one there, else one the agent makes. */
async function agentGitDir(workspace: string): Promise<string> {
  const dir = join(workspace, ".git");
  if (!existsSync(dir)) await git(["init", "--quiet", workspace]);
  await writeFile(join(dir, "HEAD"), "ref: refs/heads/main\n");
  await mkdir(join(dir, "objects", "info"), { recursive: true });
  await mkdir(join(dir, "refs", "heads"), { recursive: true });
  return dir;
}

/** Nothing only B had reached acme's remote. */
async function expectNothingOfB() {
  const inA = await objects(acmeRemote());
  expect([...inA].filter((o) => onlyB.has(o))).toEqual([]);
  await expect(git(["--git-dir", acmeRemote(), "cat-file", "-e", b.secretCommit])).rejects.toThrow();
  const everything = await git(["--git-dir", acmeRemote(), "log", "--all", "-p", "--format=%H %s"]);
  expect(everything).not.toContain(b.secret);
}

interface Attack {
  workspace: string;
}

const attacks: [string, (a: Attack) => Promise<string[]>][] = [
  [
    "the reported attack: relative alternates to B's objects and refs/heads/main symlinked to B's ref",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      const objectsDir = join(dir, "objects");
      await writeFile(
        join(objectsDir, "info", "alternates"),
        `${relative(objectsDir, join(b.repository, "objects"))}\n`,
      );
      await rm(join(dir, "refs", "heads", "main"), { force: true });
      await symlink(join(b.repository, "refs", "heads", "main"), join(dir, "refs", "heads", "main"));
      return [];
    },
  ],
  [
    "absolute alternates and update-ref to B's commit",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "objects", "info", "alternates"), `${join(b.repository, "objects")}\n`);
      await git(["update-ref", "refs/heads/main", b.secretCommit], workspace);
      return [];
    },
  ],
  [
    "objects/info/http-alternates and a ref to B's commit",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "objects", "info", "http-alternates"), `${join(b.repository, "objects")}\n`);
      await writeFile(join(dir, "refs", "heads", "main"), `${b.secretCommit}\n`);
      return [];
    },
  ],
  [
    "refs/heads symlinked to B's refs/heads, with alternates",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "objects", "info", "alternates"), `${join(b.repository, "objects")}\n`);
      await rm(join(dir, "refs", "heads"), { recursive: true, force: true });
      await symlink(join(b.repository, "refs", "heads"), join(dir, "refs", "heads"));
      return [];
    },
  ],
  [
    "HEAD symlinked to B's branch ref, with alternates",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "objects", "info", "alternates"), `${join(b.repository, "objects")}\n`);
      await rm(join(dir, "HEAD"));
      await symlink(join(b.repository, "refs", "heads", "main"), join(dir, "HEAD"));
      return [];
    },
  ],
  [
    "packed-refs symlinked to B's, with alternates",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "objects", "info", "alternates"), `${join(b.repository, "objects")}\n`);
      const packed = await readFile(join(b.repository, "packed-refs"), "utf8");
      const [sha, name] = packed
        .split("\n")
        .find((line) => /^[0-9a-f]{40} /.test(line))!
        .split(" ");
      expect(onlyB.has(sha!)).toBe(true);
      await writeFile(join(dir, "HEAD"), `ref: ${name}\n`);
      await rm(join(dir, name!), { force: true });
      await rm(join(dir, "packed-refs"), { force: true });
      await symlink(join(b.repository, "packed-refs"), join(dir, "packed-refs"));
      return [];
    },
  ],
  [
    "a .git file with gitdir: naming B's repository",
    async ({ workspace }) => {
      await rm(join(workspace, ".git"), { recursive: true, force: true });
      await writeFile(join(workspace, ".git"), `gitdir: ${b.repository}\n`);
      return [];
    },
  ],
  [
    "commondir naming B's repository",
    async ({ workspace }) => {
      const dir = await agentGitDir(workspace);
      await writeFile(join(dir, "commondir"), `${b.repository}\n`);
      return [];
    },
  ],
  [
    "a symlink to B's secret file (committed as the symlink it is)",
    async ({ workspace }) => {
      await symlink(join(b.workspace, "secret.txt"), join(workspace, "leak.txt"));
      return ["leak.txt"];
    },
  ],
];

describe("a push of session A", () => {
  it.each(attacks)(
    "commits A's working tree as files and carries nothing of B's: %s",
    async (_name, attack) => {
      const a = await session("acme", "widgets");
      await writeFile(join(a.workspace, "NOTES.md"), "session A's work\n");
      const extra = await attack({ workspace: a.workspace });
      const branch = `exfil-${randomBytes(4).toString("hex")}`;
      const res = await a.push(branch);
      expect(res.status).toBe(200);
      const sha = (await res.json()).remote_head_sha;
      const bare = acmeRemote();
      // A's own history: one commit on top of the branch A cloned, holding A's files and nothing else.
      expect(await git(["--git-dir", bare, "rev-parse", `${sha}^`])).toBe(mainHead);
      expect((await git(["--git-dir", bare, "ls-tree", "-r", "--name-only", sha])).split("\n")).toEqual(
        ["NOTES.md", "README.md", ...extra, "src/index.ts"].sort(),
      );
      for (const path of extra) {
        // A symlink stays a symlink: its target's path, never the file it names.
        expect(await git(["--git-dir", bare, "ls-tree", sha, path])).toMatch(/^120000 blob /);
        expect(await git(["--git-dir", bare, "cat-file", "-p", `${sha}:${path}`])).toBe(
          join(b.workspace, "secret.txt"),
        );
      }
      await expectNothingOfB();
    },
  );

  it("refuses a nested repository (a directory with its own .git) instead of recording it", async () => {
    const a = await session("acme", "widgets");
    await mkdir(join(a.workspace, "vendor"));
    await writeFile(join(a.workspace, "vendor", "x.txt"), "x\n");
    await writeFile(join(a.workspace, "vendor", ".git"), `gitdir: ${b.repository}\n`);
    const res = await a.push("nested-gitdir");
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(/nested git repository at 'vendor'/),
      code: "nested_repository",
    });
    expect(await remotes.branchHead("acme", "widgets", "nested-gitdir")).toBeUndefined();
    await expectNothingOfB();
  });

  it("runs the file:// remote's receive-pack hooks without the caller's token in their environment", async () => {
    const hooked = await remotes.create("acme", "hooked");
    const dump = join(dataDir, `hook-env-${randomBytes(4).toString("hex")}`);
    await writeFile(join(hooked, "hooks", "pre-receive"), `#!/bin/sh\nenv > '${dump}'\nexit 0\n`, {
      mode: 0o755,
    });
    const a = await session("acme", "hooked");
    await writeFile(join(a.workspace, "CHANGE"), "change\n");
    const res = await a.push("hooked");
    expect(res.status).toBe(200);
    const env = await readFile(dump, "utf8");
    expect(env).toContain("GIT_DIR="); // the hook ran, and this is its environment
    expect(env).not.toContain(a.token);
    expect(env).not.toMatch(/^GW_GIT_TOKEN/m);
  });
});
