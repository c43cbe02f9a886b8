import { createCipheriv, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "@gw/core/config";
import { Vault } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { processRunning, useTestDatabase } from "@gw/test-kit";
import { type BareRepositories, bareRepositories } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { serviceConfigSchema } from "../config.ts";
import { ConnectionStore, legacyConnectionKey, UnreadableConnection } from "./connections.ts";
import { Git, GitFailed, redactGitOutput } from "./git.ts";

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

/** A row as the code before the vault wrote it: AES-256-GCM under one key, the principal as additional data. */
async function putBeforeTheVault(who: Principal, token: string, key: Buffer): Promise<void> {
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(JSON.stringify(["sandbox.connection.github", who.org, who.user])));
  const ciphertext = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
  await db.query(
    `INSERT INTO sandbox_connections (org, user_id, nonce, ciphertext, tag, updated_at)
     VALUES ($1, $2, $3, $4, $5, 1700000000)`,
    [who.org, who.user, nonce, ciphertext, cipher.getAuthTag()],
  );
}

interface ConnectionRow {
  kek_id: string | null;
  wrapped_key: Buffer | null;
  sealed: Buffer | null;
  nonce: Buffer | null;
  ciphertext: Buffer | null;
  tag: Buffer | null;
  updated_at: string;
}

async function rowOf(who: Principal): Promise<ConnectionRow> {
  const { rows } = await db.query<ConnectionRow>(
    `SELECT kek_id, wrapped_key, sealed, nonce, ciphertext, tag, updated_at
     FROM sandbox_connections WHERE org = $1 AND user_id = $2`,
    [who.org, who.user],
  );
  return rows[0]!;
}

const vaultKey = (id: string) => ({ id, key: randomBytes(32) });
const freshOrg = () => ({ ...alice, org: `org-${randomBytes(4).toString("hex")}` });

describe("stored connections", () => {
  const k1 = vaultKey("k1");
  const vault = new Vault([k1]);

  it("are sealed by the vault, with a fresh data key on every write, and the token nowhere in the row", async () => {
    const store = new ConnectionStore(db, vault);
    const who = freshOrg();
    const token = `ghp_${randomBytes(18).toString("hex")}`;
    await store.put(who, token);
    const first = await rowOf(who);
    expect(first).toMatchObject({ kek_id: "k1", nonce: null, ciphertext: null, tag: null });
    expect(first.wrapped_key).toBeInstanceOf(Buffer);
    expect(first.sealed).toBeInstanceOf(Buffer);
    const raw = JSON.stringify(first);
    for (const encoded of [token, Buffer.from(token).toString("base64"), Buffer.from(token).toString("hex")])
      expect(raw).not.toContain(encoded);
    await store.put(who, token);
    const second = await rowOf(who);
    expect(second.wrapped_key!.equals(first.wrapped_key!)).toBe(false);
    expect(second.sealed!.equals(first.sealed!)).toBe(false);
    expect(await store.token(who)).toBe(token);
  });

  it("stored before the vault are read with SANDBOX_CONNECTION_KEY and moved into the vault on that read", async () => {
    const legacyKey = randomBytes(32);
    const who = freshOrg();
    await putBeforeTheVault(who, "ghp_from_before", legacyKey);
    expect(await new ConnectionStore(db, vault, { legacyKey }).token(who)).toBe("ghp_from_before");
    const moved = await rowOf(who);
    expect(moved).toMatchObject({
      kek_id: "k1",
      nonce: null,
      ciphertext: null,
      tag: null,
      updated_at: "1700000000",
    });
    // It now opens without the old key: the vault alone holds it.
    expect(await new ConnectionStore(db, vault).token(who)).toBe("ghp_from_before");
    expect(await rowOf(who)).toEqual(moved);
  });

  it("stored before the vault, without the old key, are a 409 that says to store them again (and stay as they are)", async () => {
    const who = freshOrg();
    await putBeforeTheVault(who, "ghp_from_before", randomBytes(32));
    const before = await rowOf(who);
    for (const legacyKey of [undefined, randomBytes(32)]) {
      const refused = new ConnectionStore(db, vault, { legacyKey }).token(who);
      await expect(refused).rejects.toBeInstanceOf(UnreadableConnection);
      await expect(refused).rejects.toMatchObject({
        status: 409,
        message: expect.stringMatching(/store it again/),
      });
    }
    expect(await rowOf(who)).toEqual(before);
  });

  it("are re-wrapped under the first of VAULT_KEYS when read with keys rotated", async () => {
    const who = freshOrg();
    await new ConnectionStore(db, vault).put(who, "ghp_rotated");
    const before = await rowOf(who);
    const k2 = vaultKey("k2");
    expect(await new ConnectionStore(db, new Vault([k2, k1])).token(who)).toBe("ghp_rotated");
    const after = await rowOf(who);
    expect(after.kek_id).toBe("k2");
    expect(after.wrapped_key!.equals(before.wrapped_key!)).toBe(false);
    // Only the data key's wrapping changes; the old key can go.
    expect(after.sealed!.equals(before.sealed!)).toBe(true);
    expect(await new ConnectionStore(db, new Vault([k2])).token(who)).toBe("ghp_rotated");
  });

  it("are bound to their principal: moved under another user's or organization's key, they do not open", async () => {
    const store = new ConnectionStore(db, vault);
    const org = freshOrg().org;
    await store.put({ ...alice, org }, "ghp_alices");
    // Alice's row copied under another user's and another organization's key.
    await db.query(
      `INSERT INTO sandbox_connections (org, user_id, kek_id, wrapped_key, sealed, updated_at)
       SELECT org, 'mallory', kek_id, wrapped_key, sealed, updated_at FROM sandbox_connections WHERE org = $1
       UNION ALL
       SELECT 'other-' || org, user_id, kek_id, wrapped_key, sealed, updated_at FROM sandbox_connections WHERE org = $1`,
      [org],
    );
    for (const thief of [
      { ...alice, org, user: "mallory" },
      { ...alice, org: `other-${org}` },
    ]) {
      expect(await store.status(thief)).toMatchObject({ connected: true });
      await expect(store.token(thief)).rejects.toBeInstanceOf(UnreadableConnection);
    }
    // Under other vault keys nothing opens either: 409, store it again.
    await expect(
      new ConnectionStore(db, new Vault([vaultKey("k1")])).token({ ...alice, org }),
    ).rejects.toMatchObject({
      status: 409,
    });
  });

  it("stored before the vault and moved under another principal do not open, and are not moved", async () => {
    const legacyKey = randomBytes(32);
    const owner = freshOrg();
    await putBeforeTheVault(owner, "ghp_alices", legacyKey);
    const thief = { ...owner, user: "mallory" };
    await db.query(
      `INSERT INTO sandbox_connections (org, user_id, nonce, ciphertext, tag, updated_at)
       SELECT org, 'mallory', nonce, ciphertext, tag, updated_at FROM sandbox_connections WHERE org = $1`,
      [owner.org],
    );
    await expect(new ConnectionStore(db, vault, { legacyKey }).token(thief)).rejects.toBeInstanceOf(
      UnreadableConnection,
    );
    expect(await rowOf(thief)).toMatchObject({ kek_id: null, nonce: expect.any(Buffer) });
  });

  it("are not overwritten by a move or a re-wrap of what was read when a new token is stored meanwhile", async () => {
    const legacyKey = randomBytes(32);
    const k2 = vaultKey("k2");
    const cases: [string, (who: Principal) => Promise<void>, Vault][] = [
      ["move", (who) => putBeforeTheVault(who, "ghp_old", legacyKey), vault],
      ["re-wrap", (who) => new ConnectionStore(db, vault).put(who, "ghp_old"), new Vault([k2, k1])],
    ];
    for (const [, storeOld, reader] of cases) {
      const who = freshOrg();
      await storeOld(who);
      const store = new ConnectionStore(db, reader, {
        legacyKey,
        afterRead: () => new ConnectionStore(db, reader).put(who, "ghp_new"),
      });
      expect(await store.token(who)).toBe("ghp_old");
      expect(await new ConnectionStore(db, reader).token(who)).toBe("ghp_new");
    }
  });

  it("read the development key an earlier version kept in DATA_DIR, and make none", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-connection-key-"));
    const file = join(dir, "sandbox-connection-key");
    expect(await legacyConnectionKey(undefined, dir)).toBeUndefined();
    expect(existsSync(file)).toBe(false);
    const kept = randomBytes(32);
    await writeFile(file, kept.toString("base64url"), { mode: 0o600 });
    expect((await legacyConnectionKey(undefined, dir))!.equals(kept)).toBe(true);
    const configured = randomBytes(32);
    expect((await legacyConnectionKey(configured.toString("base64"), dir))!.equals(configured)).toBe(true);
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
