import { type AuthorizationHooks, scopedId } from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunningGateway } from "../src/server.ts";
import { freshOrg, useGateway } from "./harness.ts";
import { MCP_ENV, startReplica } from "./mcp/mcp-helpers.ts";

/**
 * Two gateways on one Redis and one SpiceDB, each with its own clock that
 * stands still unless the test moves it: a decision either keeps is kept
 * until the test says otherwise, so what survives an outage is not a matter
 * of how fast the test ran.
 */
const clockA = new ManualClock();
const clockB = new ManualClock();
/** `SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS`, the default: also how long a gateway distrusts Redis once it is back. */
const WINDOW_MS = 6_000;
const gw = useGateway(MCP_ENV, undefined, "single", clockA);
const hooksB: AuthorizationHooks = {};
let b: RunningGateway;

beforeAll(async () => {
  b = await startReplica(gw, {}, createLogger("replica", "silent"), {
    clock: clockB,
    authorizationHooks: hooksB,
  });
});
afterAll(async () => {
  await b?.close();
});

/** Both gateways' clocks move on together. */
const advance = (ms: number) => {
  clockA.advance(ms);
  clockB.advance(ms);
};

/** A fresh organization with a key acting for its users; alice registers an MCP server and makes bob a reader. */
async function serverBobReads() {
  const org = freshOrg();
  const key = async () => (await gw.store.create({ org, owner: "backend" })).secret;
  let secret = await key();
  const call = (gateway: { url: string }, user: string, path: string, json?: unknown) =>
    fetch(`${gateway.url}${path}`, {
      method: json === undefined ? "GET" : "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "x-on-behalf-of": user,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    });
  const registered = await call(gw, "alice", "/api/v1/mcp/servers", {
    name: "files",
    url: "http://127.0.0.1:9/mcp",
  });
  expect(registered.status).toBe(201);
  const id = ((await registered.json()) as { id: string }).id;
  const role = { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" };
  expect((await call(gw, "alice", "/api/v1/authorization/llm/grant", role)).status).toBe(204);
  return {
    id,
    /** Redis lost the key with everything else: a new one for the same organization. */
    newKey: async () => {
      secret = await key();
    },
    revoke: (gateway: { url: string }) => call(gateway, "alice", "/api/v1/authorization/llm/revoke", role),
    /** What bob's check answers on `gateway`. */
    check: async (gateway: { url: string }) => {
      const res = await call(
        gateway,
        "bob",
        `/api/v1/authorization/llm/check?resourceType=mcp_server&resourceId=${id}&role=reader`,
      );
      expect(res.status).toBe(200);
      return ((await res.json()) as { allowed: boolean }).allowed;
    },
    /** Whether the server is in bob's list on `gateway`. */
    listed: async (gateway: { url: string }) => {
      const res = await call(gateway, "bob", "/api/v1/mcp/servers?limit=100");
      expect(res.status).toBe(200);
      return ((await res.json()) as { data: { id: string }[] }).data.some((s) => s.id === id);
    },
    /** The "recent" windows of the grant (Redis expires them by itself) are over. */
    pastRecentWindows: () =>
      pastRecentWindow(
        gw.redis,
        `gw:zedtoken:{mcp_server:${scopedId(org, id)}}`,
        `gw:zedtoken:{organization:${org}}`,
      ),
  };
}

/** Decisions a gateway answered from its cache so far. */
async function cacheHits(gateway: { metricsUrl: string }): Promise<number> {
  const text = await (await fetch(gateway.metricsUrl)).text();
  return Number(/^gateway_decision_cache_lookups_total\{outcome="hit"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

/** Kept decisions a gateway dropped because Redis's connection broke since they were kept. */
async function droppedForOutage(gateway: { metricsUrl: string }): Promise<number> {
  const text = await (await fetch(gateway.metricsUrl)).text();
  return Number(
    /^gateway_decision_cache_invalidations_total\{reason="redis_outage"\} (\d+)/m.exec(text)?.[1] ?? 0,
  );
}

/** Both gateways answer on Redis again (each reconnects after its own retry pause). */
async function bothBackOnRedis() {
  await vi.waitFor(
    async () => {
      for (const gateway of [gw, b]) expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    },
    { timeout: 15_000, interval: 100 },
  );
}

describe("a revoke made while Redis is down holds on every gateway once Redis is back", () => {
  it.each(["kept", "lost"] as const)(
    "Redis %s its data: checks and lists on both gateways stay revoked once it is back",
    async (outcome) => {
      const bob = await serverBobReads();
      for (const gateway of [gw, b]) expect(await bob.check(gateway)).toBe(true);
      // Both gateways have been on Redis for a while, the grant's window is over: decisions are kept.
      advance(WINDOW_MS);
      await bob.pastRecentWindows();
      for (const gateway of [gw, b]) {
        expect(await bob.check(gateway)).toBe(true);
        const hits = await cacheHits(gateway);
        expect(await bob.check(gateway)).toBe(true);
        expect(await cacheHits(gateway), "the second check came from the gateway's cache").toBe(hits + 1);
        expect(await bob.listed(gateway)).toBe(true);
      }

      if (outcome === "kept") await gw.redis.save();
      await gw.redisServer.halt();
      try {
        expect((await bob.revoke(gw)).status).toBe(204);
        for (const gateway of [gw, b]) {
          expect(await bob.check(gateway)).toBe(false);
          expect(await bob.listed(gateway)).toBe(false);
        }
      } finally {
        await gw.redisServer.restart();
      }
      if (outcome === "lost") await bob.newKey();
      await bothBackOnRedis();

      // Right away, on both: neither a decision kept before the outage nor a read older than the revoke.
      for (const gateway of [gw, b]) {
        expect(await bob.check(gateway)).toBe(false);
        expect(await bob.listed(gateway)).toBe(false);
      }
    },
  );

  it("a check SpiceDB answered before the revoke, kept only after Redis is back, is not served by the replica that did not revoke", async () => {
    const bob = await serverBobReads();
    for (const gateway of [gw, b]) expect(await bob.check(gateway)).toBe(true);
    advance(WINDOW_MS);
    await bob.pastRecentWindows();

    // B's check has SpiceDB's answer (the grant still stands) and is held before B keeps it.
    let answered!: () => void;
    const held = new Promise<void>((resolve) => {
      answered = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    hooksB.beforeKeep = async (_principal, resource, allowed) => {
      if (resource.id !== bob.id || !allowed) return;
      answered();
      await released;
    };
    try {
      const inFlight = bob.check(b);
      await held;
      await gw.redis.save();
      await gw.redisServer.halt();
      try {
        expect((await bob.revoke(gw)).status).toBe(204);
      } finally {
        await gw.redisServer.restart();
      }
      await bothBackOnRedis();
      release();
      // Asked before the revoke was acknowledged: the grant's answer.
      expect(await inFlight).toBe(true);
    } finally {
      delete hooksB.beforeKeep;
    }

    const hits = await cacheHits(b);
    expect(await bob.check(b)).toBe(false);
    expect(await bob.check(gw)).toBe(false);
    expect(await bob.listed(b)).toBe(false);
    // Once B trusts Redis again, the decision it kept late is dropped, not served.
    advance(WINDOW_MS);
    const dropped = await droppedForOutage(b);
    await bob.check(b);
    expect(await droppedForOutage(b)).toBe(dropped + 1);
    expect(await cacheHits(b)).toBe(hits);
  });
});
