import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "@gw/core/config";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { capturingLogger, processRunning, useTestDatabase } from "@gw/test-kit";
import { type BareRepositories, bareRepositories } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { ConnectionStore, connectionKey, UnreadableConnection } from "../src/sandbox/connections.ts";
import { Git, GitFailed, redactGitOutput } from "../src/sandbox/git.ts";

let remotes: BareRepositories;
let db: Postgres;
const gits: Git[] = [];
const database = useTestDatabase();

beforeAll(async () => {
  db = createPostgres(database.url, { connectionName: "test" });
  remotes = await bareRepositories();
  await remotes.create("acme", "widgets");
});

afterAll(async () => {
  await Promise.all(gits.map((g) => g.close()));
  await db.close();
  await remotes.remove();
});

async function git(baseUrl: string, timeoutMs = 10_000): Promise<Git> {
  const created = await Git.create({ baseUrl, timeoutMs, caFile: undefined });
  gits.push(created);
  return created;
}

const alice: Principal = {
  org: "acme",
  user: "alice",
  keyId: "k",
  permissions: [],
  credential: "api_key",
  onBehalfOf: true,
};

describe("stored connections", () => {
  const key = randomBytes(32);

  it("round-trip, with a fresh nonce on every write", async () => {
    const store = new ConnectionStore(db, key);
    const who = { ...alice, org: `org-${randomBytes(4).toString("hex")}` };
    const stored = async () =>
      (
        await db.query<{ nonce: Buffer; ciphertext: Buffer }>(
          "SELECT nonce, ciphertext FROM sandbox_connections WHERE org = $1 AND user_id = 'alice'",
          [who.org],
        )
      ).rows[0]!;
    await store.put(who, "ghp_same");
    const first = await stored();
    await store.put(who, "ghp_same");
    const second = await stored();
    expect(second.nonce.equals(first.nonce)).toBe(false);
    expect(second.ciphertext.equals(first.ciphertext)).toBe(false);
    expect(first.nonce).toHaveLength(12);
    expect(await store.token(who)).toBe("ghp_same");
  });

  it("are bound to their principal: moved under another user's or organization's key, they do not decrypt", async () => {
    const store = new ConnectionStore(db, key);
    const org = `org-${randomBytes(4).toString("hex")}`;
    await store.put({ ...alice, org }, "ghp_alices");
    // Alice's row copied under another user's and another organization's key.
    await db.query(
      `INSERT INTO sandbox_connections (org, user_id, nonce, ciphertext, tag, updated_at)
       SELECT org, 'mallory', nonce, ciphertext, tag, updated_at FROM sandbox_connections WHERE org = $1
       UNION ALL
       SELECT 'other-' || org, user_id, nonce, ciphertext, tag, updated_at FROM sandbox_connections WHERE org = $1`,
      [org],
    );
    for (const thief of [
      { ...alice, org, user: "mallory" },
      { ...alice, org: `other-${org}` },
    ]) {
      expect(await store.status(thief)).toMatchObject({ connected: true });
      await expect(store.token(thief)).rejects.toBeInstanceOf(UnreadableConnection);
    }
    // Under another key nothing decrypts either: 409, store it again.
    await expect(new ConnectionStore(db, randomBytes(32)).token({ ...alice, org })).rejects.toMatchObject({
      status: 409,
    });
  });

  it("use a development key kept private in DATA_DIR when none is configured, and say so", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-connection-key-"));
    const { logger, lines } = capturingLogger("warn");
    const first = await connectionKey(undefined, dir, logger);
    const second = await connectionKey(undefined, dir, logger);
    expect(first).toHaveLength(32);
    expect(second.equals(first)).toBe(true);
    expect((await stat(join(dir, "sandbox-connection-key"))).mode & 0o777).toBe(0o600);
    expect(lines.join("")).toMatch(/production must set SANDBOX_CONNECTION_KEY/);
    const configured = randomBytes(32);
    expect((await connectionKey(configured.toString("base64"), dir, logger)).equals(configured)).toBe(true);
    await rm(dir, { recursive: true, force: true });
  });
});

describe("sandbox configuration", () => {
  const parse = (env: Record<string, string>) =>
    loadConfig(serviceConfigSchema, { DATA_DIR: "/srv/data", ...env });

  it("has defaults", () => {
    expect(parse({}).sandbox).toEqual({
      root: "/srv/data/sandbox",
      repositories: "/srv/data/sandbox-git",
      connectionKey: undefined,
      dataDir: "/srv/data",
      baseUrl: "https://github.com",
      author: { name: "Sandbox", email: "sandbox@localhost" },
      gitTimeoutMs: 60_000,
      pushWaitMs: 60_000,
      caFile: undefined,
    });
    expect(
      parse({ GIT_BASE_URL: "file:///srv/git/", SANDBOX_ROOT: "ws", SANDBOX_GIT_DIR: "repos" }).sandbox,
    ).toMatchObject({
      baseUrl: "file:///srv/git",
      root: resolve("ws"),
      repositories: resolve("repos"),
    });
  });

  it.each([
    [{ SANDBOX_CONNECTION_KEY: "c2hvcnQ=" }, "SANDBOX_CONNECTION_KEY: must be 32 bytes"],
    [{ GIT_BASE_URL: "http://github.com" }, "GIT_BASE_URL: must be an https:// or file:// URL"],
    [{ GIT_BASE_URL: "https://user:secret@github.com" }, "GIT_BASE_URL: must not carry credentials"],
    [{ GIT_BASE_URL: "ext::sh -c touch% /tmp/x" }, "GIT_BASE_URL: must be"],
    [{ SANDBOX_GIT_AUTHOR: "no email" }, "SANDBOX_GIT_AUTHOR: must look like `Name <email>`"],
    [{ SANDBOX_GIT_TIMEOUT_MS: "0" }, "SANDBOX_GIT_TIMEOUT_MS"],
    // The agents write the workspaces: the repositories are neither among them nor around them.
    [{ SANDBOX_ROOT: "/srv/ws", SANDBOX_GIT_DIR: "/srv/ws/repos" }, "SANDBOX_GIT_DIR: must not contain"],
    [{ SANDBOX_ROOT: "/srv/ws", SANDBOX_GIT_DIR: "/srv/ws" }, "SANDBOX_GIT_DIR: must not contain"],
    [{ SANDBOX_ROOT: "/srv/repos/ws", SANDBOX_GIT_DIR: "/srv/repos" }, "SANDBOX_GIT_DIR: must not contain"],
    [{ SANDBOX_ROOT: "/srv/data/sandbox-git" }, "SANDBOX_GIT_DIR: must not contain"],
  ])("refuses %j", (env, problem) => {
    expect(() => parse(env)).toThrow(problem);
  });
});

describe("git", () => {
  it("sees none of the service's environment, no user config, no prompts, and hooks off", async () => {
    process.env.GW_TEST_SERVICE_SECRET = "service-only";
    const g = await git("https://github.com");
    delete process.env.GW_TEST_SERVICE_SECRET;
    const { stdout } = await g.run(["-c", "alias.dump=!env", "dump"], { token: "ghp_given" });
    const env = stdout.split("\n");
    expect(env).not.toContain("GW_TEST_SERVICE_SECRET=service-only");
    expect(env).toEqual(
      expect.arrayContaining([
        "GIT_CONFIG_NOSYSTEM=1",
        "GIT_CONFIG_GLOBAL=/dev/null",
        "GIT_TERMINAL_PROMPT=0",
        "GIT_NO_REPLACE_OBJECTS=1",
      ]),
    );
    expect((await g.run(["config", "--get", "core.hooksPath"])).stdout.trim()).toBe("/dev/null");
    expect((await g.run(["config", "--get", "core.symlinks"])).stdout.trim()).toBe("true");
    // The token is in no environment: the askpass script reads it from a file named there.
    expect(stdout).not.toContain("ghp_given");
    const askpass = env.find((line) => line.startsWith("GIT_ASKPASS="))!.slice("GIT_ASKPASS=".length);
    expect(await readFile(askpass, "utf8")).toContain('cat "$GW_GIT_TOKEN_FILE"');
  });

  it("hands the token to askpass in a file only the service's user reads, there only while git runs", async () => {
    const g = await git("https://github.com");
    const { stdout } = await g.run(
      [
        "-c",
        'alias.token=!echo "$GW_GIT_TOKEN_FILE"; stat -c %a "$GW_GIT_TOKEN_FILE"; cat "$GW_GIT_TOKEN_FILE"',
        "token",
      ],
      { token: "ghp_given" },
    );
    const [file, mode, token] = stdout.trim().split("\n");
    expect(mode).toBe("600");
    expect(token).toBe("ghp_given");
    expect(existsSync(file!)).toBe(false);
    // The file transport asks for no credential: git does not get it at all.
    const local = await git(`file://${remotes.root}`);
    const { stdout: env } = await local.run(["-c", "alias.dump=!env", "dump"], { token: "ghp_given" });
    expect(env).not.toContain("ghp_given");
    expect(env).not.toContain("GW_GIT_TOKEN");
  });

  it("allows only https, and file only when the base URL is a file URL", async () => {
    const url = `file://${remotes.root}/acme/widgets.git`;
    const https = await git("https://github.com");
    await expect(https.run(["ls-remote", "--", url])).rejects.toMatchObject({
      stderr: expect.stringContaining("transport 'file' not allowed"),
    });
    await expect(https.run(["ls-remote", "--", "ext::sh -c true"])).rejects.toMatchObject({
      stderr: expect.stringContaining("transport 'ext' not allowed"),
    });
    const file = await git(`file://${remotes.root}`);
    expect((await file.run(["ls-remote", "--", url])).stdout).toContain("refs/heads/main");
    await expect(file.run(["ls-remote", "--", "ext::sh -c true"])).rejects.toBeInstanceOf(GitFailed);
  });

  it("kills git and everything it started at the deadline", async () => {
    // A deadline long enough for the shell to start and write its pids on a loaded machine.
    const g = await git("https://github.com", 2_000);
    // The alias's shell writes its own pid and its child's: exactly the processes to check.
    const dir = await mkdtemp(join(tmpdir(), "gw-git-deadline-"));
    const pids = join(dir, "pids");
    const call = g.run([
      "-c",
      `alias.slow=!echo $$ >> ${pids}; sleep 1000 & echo $! >> ${pids}; wait`,
      "slow",
    ]);
    let started: number[] = [];
    try {
      await expect(call).rejects.toMatchObject({ timedOut: true });
      started = (await readFile(pids, "utf8")).trim().split("\n").map(Number);
      expect(started).toHaveLength(2);
      await vi.waitFor(() => expect(started.filter(processRunning)).toEqual([]), {
        timeout: 10_000,
        interval: 20,
      });
    } finally {
      for (const pid of started.filter(processRunning)) process.kill(pid, "SIGKILL"); // none unless the test failed
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("judges branch names as git check-ref-format --branch does", async () => {
    const g = await git("https://github.com");
    for (const name of ["main", "feature/x", "release-1.2", "é", "@"])
      expect(await g.isValidBranchName(name)).toBe(true);
    for (const name of [
      "-x",
      "--upload-pack=x",
      "a..b",
      "HEAD",
      "@{-1}",
      "a b",
      "x.lock",
      "/x",
      "a//b",
      "a\0b",
    ]) {
      expect(await g.isValidBranchName(name)).toBe(false);
    }
  });

  it("output is redacted: the token, URL credentials and hints go", () => {
    expect(
      redactGitOutput(
        "remote: token ghp_abc seen\nfatal: unable to access 'https://x-access-token:ghp_abc@github.com/o/r.git/'\nhint: try again",
        ["ghp_abc"],
      ),
    ).toBe("remote: token [redacted] seen\nfatal: unable to access 'https://[redacted]@github.com/o/r.git/'");
    expect(redactGitOutput("fatal: 'https://user:pw@host/x' failed", [])).toBe(
      "fatal: 'https://[redacted]@host/x' failed",
    );
  });
});
