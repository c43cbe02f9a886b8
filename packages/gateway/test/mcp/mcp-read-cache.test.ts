import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { systemClock } from "@gw/core/clock";
import { CredentialStore, MCP_CHANGES_CHANNEL, McpReadCache, McpServerStore, Vault } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { createTestDatabase, startTestRedis, type TestDatabase, type TestRedis } from "@gw/test-kit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

let database: TestDatabase;
let db: Postgres;
let redisServer: TestRedis;
const connections: RedisClient[] = [];
beforeAll(async () => {
  [database, redisServer] = await Promise.all([createTestDatabase(), startTestRedis()]);
  db = createPostgres(database.url, { connectionName: "test" });
});
afterEach(() => {
  for (const c of connections.splice(0)) c.disconnect();
});
afterAll(async () => {
  await db.close();
  await Promise.all([database.drop(), redisServer.stop()]);
});

const vault = new Vault([{ id: "k1", key: randomBytes(32) }]);

/** One gateway replica's view: its stores over the shared PostgreSQL, its cache fed by the shared Redis. */
async function replica(name: string) {
  let selects = 0;
  const counting = {
    query: ((text: string, values?: unknown[]) => {
      if (/^\s*SELECT/i.test(text)) selects++;
      return db.query(text, values);
    }) as Postgres["query"],
  };
  const publisher = createRedis(redisServer.url, { connectionName: `${name}-pub` });
  const subscriber = createRedis(redisServer.url, {
    connectionName: `${name}-sub`,
    extra: { autoResubscribe: false },
  });
  connections.push(publisher, subscriber);
  const cache = new McpReadCache({ publisher, subscriber, clock: systemClock });
  await cache.start();
  return {
    servers: new McpServerStore(counting, systemClock, cache),
    credentials: new CredentialStore(counting, vault, { clock: systemClock, cache }),
    selects: () => selects,
    subscriber,
    /** Resolves when this replica has heard the next `count` changes. */
    heard: (count = 1) =>
      new Promise<void>((resolve) => {
        let left = count;
        const listener = () => {
          if (--left > 0) return;
          subscriber.off("message", listener);
          resolve();
        };
        subscriber.on("message", listener);
      }),
  };
}

type Replica = Awaited<ReturnType<typeof replica>>;

/** The headers alice's call to the server at `origin` would send, through a replica's stores. */
async function headersFor(r: Replica, serverId: string, origin: string) {
  const sealed = await r.credentials.sealedFor("acme", serverId, "alice");
  return (await r.credentials.open(sealed, { id: serverId, origin })).headers;
}

/** Registers `server` with a shared bearer credential ("one") through `through`, once `listener` has heard both changes. */
async function register(
  through: Replica,
  listener: Replica,
  server: { id: string; name: string; url: string },
) {
  const heard = listener.heard(2);
  await through.servers.create("acme", { ...server, description: null });
  await through.credentials.put("acme", { id: server.id, origin: ORIGIN }, null, {
    type: "bearer",
    token: "one",
  });
  await heard;
}

const SERVER = {
  id: "mcp_0123456789abcdef0123abcd",
  name: "tools",
  url: "https://tools.example/mcp",
  description: null,
};
const ORIGIN = "https://tools.example";

describe("MCP servers and credentials kept per replica (McpReadCache)", () => {
  it("a proxied call's reads come from the copy; a change on this replica is seen at once, on another once it hears of it", async () => {
    const a = await replica("a");
    const b = await replica("b");
    await register(a, b, SERVER);
    const headers = (r: Replica) => headersFor(r, SERVER.id, ORIGIN);

    expect((await b.servers.get("acme", SERVER.id))?.url).toBe(SERVER.url);
    expect(await headers(b)).toEqual({ authorization: "Bearer one" });
    const read = b.selects();
    for (let i = 0; i < 5; i++) {
      expect((await b.servers.get("acme", SERVER.id))?.url).toBe(SERVER.url);
      expect(await headers(b)).toEqual({ authorization: "Bearer one" });
    }
    expect(b.selects()).toBe(read);

    // Changed through replica a: a sees it at once, b as soon as the change feed reaches it.
    let heard = b.heard();
    await a.servers.update("acme", SERVER.id, { url: "https://tools.example/v2/mcp" }, false);
    expect((await a.servers.get("acme", SERVER.id))?.url).toBe("https://tools.example/v2/mcp");
    await heard;
    expect((await b.servers.get("acme", SERVER.id))?.url).toBe("https://tools.example/v2/mcp");

    heard = b.heard();
    await a.credentials.put("acme", { id: SERVER.id, origin: ORIGIN }, "alice", {
      type: "bearer",
      token: "alices",
    });
    await heard;
    expect(await headers(b)).toEqual({ authorization: "Bearer alices" });

    heard = b.heard();
    await a.credentials.delete("acme", SERVER.id, "alice");
    await heard;
    expect(await headers(b)).toEqual({ authorization: "Bearer one" });

    heard = b.heard();
    await a.servers.delete("acme", SERVER.id);
    await heard;
    expect(await b.servers.get("acme", SERVER.id)).toBeUndefined();
    expect(await headers(b)).toEqual({});
  });

  it("opens a kept credential once, and only for the server and origin it was opened for", async () => {
    const a = await replica("a");
    const server = { ...SERVER, id: "mcp_0123456789abcdef0123abc0" };
    // Its own changes come back on the feed too, and drop what it kept: heard before the reads.
    await register(a, a, server);
    const opens = vi.spyOn(vault, "open");
    try {
      const headers = (origin: string) => headersFor(a, server.id, origin);
      for (let i = 0; i < 3; i++) expect(await headers(ORIGIN)).toEqual({ authorization: "Bearer one" });
      expect(opens).toHaveBeenCalledTimes(1);
      // The same kept row for another origin: the secret opened for the first is not handed out; the
      // vault is asked, and refuses (the origin is bound into the sealed value).
      expect(await headers("https://elsewhere.example")).toEqual({});
      expect(opens).toHaveBeenCalledTimes(2);
      expect(await headers(ORIGIN)).toEqual({ authorization: "Bearer one" });
      expect(opens).toHaveBeenCalledTimes(2);
      // A new secret is a new row: opened again, and the old secret is gone with the old row.
      const heardTwo = a.heard();
      await a.credentials.put("acme", { id: server.id, origin: ORIGIN }, null, {
        type: "bearer",
        token: "two",
      });
      await heardTwo;
      expect(await headers(ORIGIN)).toEqual({ authorization: "Bearer two" });
      expect(await headers(ORIGIN)).toEqual({ authorization: "Bearer two" });
      expect(opens).toHaveBeenCalledTimes(3);
    } finally {
      opens.mockRestore();
    }
  });

  it("keeps nothing while its change feed is down, and starts over when it is back", async () => {
    const a = await replica("c");
    const b = await replica("d");
    const server = { ...SERVER, id: "mcp_0123456789abcdef0123abce" };
    await a.servers.create("acme", server);
    await b.servers.get("acme", server.id);
    b.subscriber.disconnect();
    await once(b.subscriber, "end");
    // Changed while b could not hear it: b reads PostgreSQL, and keeps nothing.
    await a.servers.update("acme", server.id, { name: "renamed" }, false);
    const before = b.selects();
    expect((await b.servers.get("acme", server.id))?.name).toBe("renamed");
    expect((await b.servers.get("acme", server.id))?.name).toBe("renamed");
    expect(b.selects()).toBe(before + 2);
    // Back: subscribed again, then kept again.
    const subscribed = new Promise<void>((resolve) =>
      b.subscriber.once("ready", () => setImmediate(resolve)),
    );
    b.subscriber.connect().catch(() => undefined);
    await subscribed;
    // Both replicas listen again (c never stopped).
    await vi.waitFor(async () => expect(await subscribers()).toBe(2));
    await b.servers.get("acme", server.id);
    const after = b.selects();
    await b.servers.get("acme", server.id);
    expect(b.selects()).toBe(after);
  });
});

/** Connections listening on the change feed now (each test's two replicas; earlier tests' are closed). */
async function subscribers(): Promise<number> {
  const probe = createRedis(redisServer.url, { connectionName: "probe" });
  try {
    const [, count] = (await probe.pubsub("NUMSUB", MCP_CHANGES_CHANNEL)) as [string, number];
    return Number(count);
  } finally {
    probe.disconnect();
  }
}
