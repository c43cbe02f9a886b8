import { mkdtemp, rm } from "node:fs/promises";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createRedis,
  isClusterUrl,
  parseClusterUrl,
  type RedisClient,
  type RedisCommandObserver,
  RedisUnavailable,
} from "@gw/core/redis";
import { startRedisServer } from "@gw/devstack";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  describeEachTopology,
  monitorCommands,
  redisStartedEarly,
  startTestRedis,
  type TestRedisStore,
} from "../src/index.ts";

describe("cluster URLs", () => {
  it("name the seed nodes, credentials and TLS", () => {
    expect(isClusterUrl("redis+cluster://a:1,b:2")).toBe(true);
    expect(isClusterUrl("redis://a:1")).toBe(false);
    expect(parseClusterUrl("redis+cluster://10.0.0.1:7000,redis-2.internal:7001")).toEqual({
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "redis-2.internal", port: 7001 },
      ],
      tls: false,
    });
    expect(parseClusterUrl("rediss+cluster://app:p%40ss@[::1]:7000/")).toEqual({
      nodes: [{ host: "::1", port: 7000 }],
      username: "app",
      password: "p@ss",
      tls: true,
    });
    expect(parseClusterUrl("redis+cluster://:secret@a:1").password).toBe("secret");
  });

  it("refuse what is not host:port", () => {
    expect(() => parseClusterUrl("redis+cluster://a")).toThrow(/'a' in a cluster URL is not host:port/);
    expect(() => parseClusterUrl("redis+cluster://a:1,b:99999")).toThrow(/'b:99999'/);
    expect(() => parseClusterUrl("redis+cluster://a:1/0")).toThrow(/redis\+cluster:\/\//);
  });
});

describeEachTopology("createRedis on %s Redis", (topology) => {
  let server: TestRedisStore;
  let redis: RedisClient;
  const seen: Parameters<RedisCommandObserver["observe"]>[] = [];
  const serverStarted = redisStartedEarly(topology);
  beforeAll(async () => {
    server = await serverStarted();
    redis = createRedis(server.url, {
      connectionName: "core-test",
      commandTimeoutMs: 1_000, // short, for the outage test below; not so short that a loaded machine trips it
      metrics: { track: () => undefined, observe: (...args) => seen.push(args) },
    });
    redis.on("error", () => undefined); // the outage test stops the servers on purpose
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it("runs scripts and transactions over keys that share a hash tag", async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `test:{tag-${i}}:a`);
    await Promise.all(keys.map((key) => redis.set(key, key)));
    expect(await Promise.all(keys.map((key) => redis.get(key)))).toEqual(keys);
    await redis.multi().set("test:{same}:a", "1").set("test:{same}:b", "2").exec();
    expect(await redis.mget("test:{same}:a", "test:{same}:b")).toEqual(["1", "2"]);
    expect(
      await redis.eval(
        "return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[2])",
        2,
        "test:{same}:a",
        "test:{same}:b",
      ),
    ).toBe("12");
  });

  it("reports each command's latency under its client name, and Redis's own refusals as such", async () => {
    const before = seen.length;
    await redis.incr("test:{count}");
    expect(seen.slice(before)).toContainEqual(["core-test", "incr", expect.any(Number), undefined]);
    const refused = await redis.hset("test:{count}", "field", "x").catch((err: Error) => err);
    // A wrong command is a bug of ours: it stays Redis's error, not a 503.
    expect(refused).not.toBeInstanceOf(RedisUnavailable);
    expect((refused as Error).message).toMatch(/WRONGTYPE/);
    expect(seen.at(-1)).toEqual(["core-test", "hset", expect.any(Number), "reply"]);
  });

  it("fails with RedisUnavailable within the command timeout while Redis is down, and recovers", async () => {
    await server.halt();
    try {
      const failed = await redis.get("test:{x}").catch((err: unknown) => err);
      expect(failed).toBeInstanceOf(RedisUnavailable);
      expect(seen.at(-1)).toEqual(["core-test", "get", expect.any(Number), "unavailable"]);
    } finally {
      await server.restart();
    }
    await vi.waitFor(async () => expect(await redis.set("test:{x}", "back")).toBe("OK"), {
      timeout: 15_000,
      interval: 100,
    });
  });

  it("lets monitorCommands see every command each server ran, up to the moment it stops", async () => {
    const monitor = await monitorCommands(server);
    await Promise.all(Array.from({ length: 10 }, (_, i) => redis.set(`watched:${i}`, String(i))));
    await monitor.stop();
    const sets = monitor.commands.filter(([name]) => name === "set").map(([, key]) => key);
    expect(sets.sort()).toEqual(Array.from({ length: 10 }, (_, i) => `watched:${i}`).sort());
  });

  if (topology === "cluster") {
    it("spreads keys over every master, and refuses a multi-key command across slots as a bug, not an outage", async () => {
      await Promise.all(Array.from({ length: 30 }, (_, i) => redis.set(`spread:${i}`, "1")));
      for (const node of server.nodes) {
        const single = createRedis(node.url, { connectionName: "core-test-node" });
        try {
          expect(Number(await single.dbsize())).toBeGreaterThan(0);
        } finally {
          single.disconnect();
        }
      }
      const crossSlot = await redis.mget("spread:1", "spread:2").catch((err: unknown) => err);
      expect(crossSlot).not.toBeInstanceOf(RedisUnavailable);
      expect((crossSlot as Error).message).toMatch(/CROSSSLOT/);
    });
  }
});

describe("startRedisServer", () => {
  it("does not take another Redis already on its port for the one it started", async () => {
    const first = await startTestRedis();
    const dir = await mkdtemp(join(tmpdir(), "gw-test-redis-second-"));
    try {
      await expect(startRedisServer({ port: first.port, dir, appendOnly: false })).rejects.toThrow(
        new RegExp(`port ${first.port} is in use by another redis-server \\(process ${first.process.pid}\\)`),
      );
    } finally {
      await first.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("a subscriber closed while ioredis subscribes it again after a reconnect", () => {
  it("leaves no unhandled rejection: the resubscribe ioredis sends by itself is rejected quietly", async () => {
    const server = await startTestRedis();
    // A relay in front of Redis that, once `holdSubscribe` is set, keeps the next SUBSCRIBE it
    // carries (and everything after it on that connection) from Redis: the reconnect's own
    // resubscribe stays unanswered until the test closes the client.
    let holdSubscribe = false;
    let subscribeHeld!: () => void;
    const held = new Promise<void>((resolve) => {
      subscribeHeld = resolve;
    });
    const sockets = new Set<Socket>();
    const relay = createServer((client) => {
      const upstream = connect(server.port, "127.0.0.1");
      sockets.add(client).add(upstream);
      let holding = false;
      client.on("data", (chunk) => {
        if (!holding && holdSubscribe && /\$9\r\nsubscribe\r\n/i.test(chunk.toString("latin1"))) {
          holding = true;
          subscribeHeld();
        }
        if (!holding) upstream.write(chunk);
      });
      upstream.on("data", (chunk) => client.write(chunk));
      for (const socket of [client, upstream]) {
        socket.on("error", () => undefined);
        socket.on("close", () => {
          sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    const subscriber = createRedis(`redis://127.0.0.1:${(relay.address() as AddressInfo).port}`, {
      connectionName: "core-test-subscriber",
    });
    subscriber.on("error", () => undefined);
    try {
      await subscriber.subscribe("test:changes");
      holdSubscribe = true;
      for (const socket of sockets) socket.destroy();
      await held;
      // What a process that closes does while its subscriber is reconnecting.
      subscriber.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      subscriber.disconnect();
      relay.close();
      for (const socket of sockets) socket.destroy();
      await server.stop();
    }
  });
});
