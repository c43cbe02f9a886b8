import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ManualClock, systemClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { Vault } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { startTestRedis, type TestRedis, useTestDatabase } from "@gw/test-kit";
import { type BareRepositories, bareRepositories } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { SandboxOptions } from "./config.ts";
import { Sandbox, type SandboxHooks, StaleAssignment } from "./sandbox.ts";
import { LockLost, SessionBusy, SessionLocks } from "./session-lock.ts";

const logger = createLogger("test", "silent");
/** The VAULT_KEYS every replica is given. */
const vaultKeys = [{ id: "test", key: randomBytes(32) }];
let redisServer: TestRedis;
let remotes: BareRepositories;
let options: SandboxOptions;
const clients: RedisClient[] = [];
const pools: Postgres[] = [];
const replicas: Sandbox[] = [];
const database = useTestDatabase();

beforeAll(async () => {
  redisServer = await startTestRedis();
  remotes = await bareRepositories();
  await remotes.create("acme", "widgets");
  const dir = await mkdtemp(join(tmpdir(), "gw-sandbox-lock-"));
  options = {
    root: join(dir, "sandbox"),
    repositories: join(dir, "repositories"),
    connectionKey: undefined,
    dataDir: dir,
    baseUrl: `file://${remotes.root}`,
    author: { name: "Sandbox", email: "sandbox@localhost" },
    gitTimeoutMs: 30_000,
    pushWaitMs: 30_000,
    caFile: undefined,
  };
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.close()));
  for (const client of clients) client.disconnect();
  await Promise.all(pools.map((p) => p.close()));
  await redisServer.stop();
  await remotes.remove();
  await rm(options.dataDir, { recursive: true, force: true });
});

/** A replica of the service's sandbox: its own Redis and PostgreSQL connections and git, sharing the stores and the workspaces. */
async function replica(hooks: SandboxHooks = {}): Promise<Sandbox> {
  const redis = createRedis(redisServer.url, { connectionName: "replica" });
  clients.push(redis);
  const db = createPostgres(database.url, { connectionName: "replica" });
  pools.push(db);
  const sandbox = await Sandbox.create(
    options,
    { redis, db, clock: systemClock, vault: new Vault(vaultKeys) },
    logger,
    hooks,
  );
  replicas.push(sandbox);
  return sandbox;
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const principal = (): Principal => ({
  org: `org-${randomBytes(4).toString("hex")}`,
  user: "alice",
  keyId: "key_test",
  permissions: ["sandbox:read", "sandbox:write"],
  credential: "api_key",
  onBehalfOf: true,
});

async function sessionOn(sandbox: Sandbox, who: Principal) {
  await sandbox.connections.put(who, `ghp_${randomBytes(8).toString("hex")}`);
  const session = await sandbox.createSession(who, {
    owner: "acme",
    repository: "widgets",
    repository_id: 1,
    ref: undefined,
  });
  await sandbox.sessions.nextAssignment(who, session.id);
  return session;
}

describe("pushes of one session", () => {
  it("never overlap across replicas: the second waits for the first's lock, then runs", async () => {
    const events: string[] = [];
    const aHolds = deferred();
    const releaseA = deferred();
    const bWaits = deferred();
    const a = await replica({
      lockHeld: async () => {
        events.push("A holds");
        aHolds.resolve();
        await releaseA.promise;
      },
    });
    const b = await replica({
      lockBusy: () => {
        events.push("B waits");
        bWaits.resolve();
      },
      lockHeld: () => {
        events.push("B holds");
      },
    });
    const who = principal();
    const session = await sessionOn(a, who);
    await writeFile(join(a.workspace(session.id), "CHANGED"), "by the agent\n");
    const request = { assignment_generation: 1, branch: "serial", checkout_path: "", force: false };
    const signal = new AbortController().signal;

    const done =
      (name: string) =>
      <T>(result: T) => {
        events.push(`${name} done`);
        return result;
      };
    const first = a.push(who, session.id, request, signal).then(done("A"));
    await aHolds.promise;
    const second = b.push(who, session.id, request, signal).then(done("B"));
    await bWaits.promise;
    expect(events).toEqual(["A holds", "B waits"]);
    releaseA.resolve();
    const [ra, rb] = await Promise.all([first, second]);
    expect(events).toEqual(["A holds", "B waits", "A done", "B holds", "B done"]);
    expect(ra.no_changes).toBe(false);
    expect(await remotes.branchHead("acme", "widgets", "serial")).toBe(ra.remote_head_sha);
    // The second found everything pushed already.
    expect(rb).toEqual({ ...ra, no_changes: true });
  });

  it("a push whose assignment was superseded while it waited does not run", async () => {
    const aHolds = deferred();
    const releaseA = deferred();
    const bWaits = deferred();
    let bHeld = false;
    const a = await replica({
      lockHeld: async () => {
        aHolds.resolve();
        await releaseA.promise;
      },
    });
    const b = await replica({
      lockBusy: () => bWaits.resolve(),
      lockHeld: () => {
        bHeld = true;
      },
    });
    const who = principal();
    const session = await sessionOn(a, who);
    const request = { assignment_generation: 1, branch: "superseded", checkout_path: "", force: false };
    const signal = new AbortController().signal;
    const first = a.push(who, session.id, request, signal);
    await aHolds.promise;
    const second = b.push(who, session.id, request, signal);
    await bWaits.promise;
    expect((await b.sessions.nextAssignment(who, session.id)).assignment_generation).toBe(2);
    releaseA.resolve();
    await first;
    await expect(second).rejects.toBeInstanceOf(StaleAssignment);
    await expect(second).rejects.toMatchObject({ status: 409 });
    expect(bHeld).toBe(false);
  });
});

describe("session locks", () => {
  const key = () => `gw:test-lock:${randomBytes(4).toString("hex")}`;
  let redis: RedisClient;
  beforeAll(() => {
    redis = createRedis(redisServer.url, { connectionName: "lock-test" });
    clients.push(redis);
  });

  it("are extended every third of their lifetime on the clock while held, and released after", async () => {
    const k = key();
    const clock = new ManualClock();
    const locks = new SessionLocks(redis, { ttlMs: 30_000, waitMs: 1_000 }, clock);
    await locks.withLock(k, {}, async (lost) => {
      for (let i = 0; i < 3; i++) {
        await redis.pexpire(k, 5_000); // as if most of its lifetime had passed
        clock.advance(9_999);
        expect(await redis.pttl(k)).toBeLessThanOrEqual(5_000); // not yet extended
        clock.advance(1);
        await vi.waitFor(async () => expect(await redis.pttl(k)).toBeGreaterThan(5_000), { timeout: 10_000 });
      }
      expect(lost.aborted).toBe(false);
    });
    expect(await redis.exists(k)).toBe(0);
    expect(clock.pending).toBe(0); // no extension left scheduled
  });

  it("in real time, outlive their lifetime while held", async () => {
    const k = key();
    // The one real-time test: two and a half lifetimes, the lock extended every third of one.
    const locks = new SessionLocks(redis, { ttlMs: 1_000, waitMs: 1_000 });
    await locks.withLock(k, {}, async (lost) => {
      await sleep(2_500);
      expect(await redis.get(k)).not.toBeNull();
      expect(lost.aborted).toBe(false);
    });
    expect(await redis.exists(k)).toBe(0);
  });

  it("release only their own lock: one that expired and was taken over stays with its new holder", async () => {
    const k = key();
    const locks = new SessionLocks(redis, { ttlMs: 10_000, waitMs: 1_000 });
    await locks.withLock(k, {}, async () => {
      await redis.set(k, "another-holder", "PX", 10_000);
    });
    expect(await redis.get(k)).toBe("another-holder");
  });

  it("tell the work when the lock is lost, and the holder fails with 503", async () => {
    const k = key();
    const clock = new ManualClock();
    const locks = new SessionLocks(redis, { ttlMs: 30_000, waitMs: 1_000 }, clock);
    const outcome = locks.withLock(k, {}, async (lost) => {
      await redis.set(k, "another-holder", "PX", 10_000);
      clock.advance(10_000); // the extension finds the lock taken over
      await new Promise((resolve) => lost.addEventListener("abort", resolve));
      throw new Error("stopped");
    });
    await expect(outcome).rejects.toBeInstanceOf(LockLost);
    await expect(outcome).rejects.toMatchObject({ status: 503 });
  });

  it("wait for a held lock on the clock and take it at the first poll after it is freed", async () => {
    const k = key();
    await redis.set(k, "another-holder", "PX", 10_000);
    const clock = new ManualClock();
    const locks = new SessionLocks(redis, { ttlMs: 10_000, waitMs: 1_000 }, clock);
    let busy = 0;
    const outcome = locks.withLock(k, { onBusy: () => void busy++ }, async () => redis.get(k));
    await vi.waitFor(() => expect(clock.pending).toBe(1), { timeout: 10_000 }); // the first pause, 25 ms
    clock.advance(25);
    await vi.waitFor(() => expect(clock.pending).toBe(1), { timeout: 10_000 }); // still held: the next pause, 50 ms
    await redis.del(k);
    clock.advance(50);
    expect(await outcome).toMatch(/^[0-9a-f]{32}$/); // the work ran under this waiter's token
    expect(busy).toBe(1);
  });

  it("give up waiting after waitMs with 409 (real time)", async () => {
    const k = key();
    await redis.set(k, "another-holder", "PX", 10_000);
    const locks = new SessionLocks(redis, { ttlMs: 10_000, waitMs: 100 });
    let ran = false;
    const outcome = locks.withLock(k, {}, async () => {
      ran = true;
    });
    await expect(outcome).rejects.toBeInstanceOf(SessionBusy);
    await expect(outcome).rejects.toMatchObject({ status: 409 });
    expect(ran).toBe(false);
  });
});
