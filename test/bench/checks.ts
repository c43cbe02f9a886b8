/**
 * Checks through the gateway as SpiceDB grows: latency at concurrency 1 and
 * throughput at 16, with the decision cache (a repeated check) and without
 * it (a gateway with `DECISION_CACHE_SIZE=0`), at each size; and the cache's
 * hit rate under a mix of many reads and a few grants.
 */
import { v1 } from "@gw/core/authz";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import type { RunningNodeProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { directClient, load, type Sample, type Stack } from "./http.ts";
import type { Report } from "./report.ts";

const CHECK = "/api/v1/authorization/llm/check";
const SIZES = (process.env.BENCH_CHECK_SIZES ?? "1000,100000").split(",").map(Number);
const MIX_SECONDS = Number(process.env.BENCH_MIX_SECONDS ?? 20);
const MIX_WARMUP_SECONDS = Number(process.env.BENCH_MIX_WARMUP_SECONDS ?? 5);

const ms = (s: Sample) => `${(s.mean ?? s.p50).toFixed(2)} / ${s.p99.toFixed(0)} ms`;

/** The decision cache's lookups by outcome, and its invalidations by reason, from a gateway's `/metrics`. */
async function cacheCounts(gateway: RunningNodeProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(
    /^gateway_decision_cache_(?:lookups|invalidations)_total\{(?:outcome|reason)="(\w+)"\} (\d+)/gm,
  ))
    counts[m[1]!] = Number(m[2]);
  return counts;
}

export async function benchChecks(
  report: Report,
  stack: Stack,
  cached: RunningNodeProcess,
  uncached: RunningNodeProcess,
): Promise<void> {
  const direct = directClient(stack.spicedbEndpoint);
  const redis = createRedis(stack.redis.url, { connectionName: "bench-checks" });
  const headers = { authorization: `Bearer ${stack.limitedKey}` };
  const post = (gateway: RunningNodeProcess, path: string, body: unknown, secret = stack.limitedKey) =>
    fetch(`${gateway.url}/api/v1/authorization/llm/${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  /** Registers files through the gateway (each gets a ZedToken), past their "recent" window at once. */
  const register = async (ids: string[]) => {
    for (const id of ids) {
      const res = await post(cached, "resources", { resourceType: "file", resourceId: id });
      if (res.status !== 201) throw new Error(`register ${id} answered ${res.status}`);
    }
    await pastRecentWindow(redis, ...ids.map((id) => `gw:zedtoken:{file:bench/${id}}`));
  };
  try {
    await register(["sized_file"]);
    const path = `${CHECK}?resourceType=file&resourceId=sized_file&role=reader`;
    const rows: string[][] = [];
    let loaded = 0;
    for (const size of SIZES) {
      // Relationships of other resources, written straight to SpiceDB: the engine slows with its total size.
      for (; loaded < size; loaded += 1_000) {
        const count = Math.min(1_000, size - loaded);
        await direct.promises.writeRelationships(
          v1.WriteRelationshipsRequest.create({
            updates: Array.from({ length: count }, (_, j) => ({
              operation: v1.RelationshipUpdate_Operation.TOUCH,
              relationship: v1.Relationship.create({
                resource: v1.ObjectReference.create({
                  objectType: "conversation",
                  objectId: `bench/sized_${loaded + j}`,
                }),
                relation: "reader",
                subject: v1.SubjectReference.create({
                  object: v1.ObjectReference.create({ objectType: "user", objectId: `bench/u${j % 1000}` }),
                }),
              }),
            })),
          }),
        );
      }
      loaded = size;
      console.log(`\nChecks with ${size.toLocaleString("en")} relationships`);
      for (const [label, gateway] of [
        ["repeated check, decision cache on (hits)", cached],
        ["decision cache off (`DECISION_CACHE_SIZE=0`): SpiceDB every time", uncached],
      ] as const) {
        const one = await load({ url: `${gateway.url}${path}`, headers, connections: 1 });
        const many = await load({ url: `${gateway.url}${path}`, headers, connections: 16 });
        rows.push([size.toLocaleString("en"), label, ms(one), many.rps.toFixed(0), ms(many)]);
        console.log(`  ${label}: ${ms(one)} at 1, ${many.rps.toFixed(0)} checks/s at 16`);
      }
      if (size === SIZES[0]) await mix(size);
    }
    report.section(
      "Checks as SpiceDB grows",
      "`GET …/authorization/llm/check` through the gateway, on the local SpiceDB holding that many relationships (written beside the checked resource). Latency mean / p99 at one connection; throughput and latency at 16.",
    );
    report.table(
      ["relationships", "gateway", "latency, 1 connection", "checks/s, 16 connections", "latency, 16"],
      rows,
    );
  } finally {
    direct.close();
    redis.disconnect();
  }

  /** Many reads, a few grants: the hit rate of the decision cache, from the gateway's own counters. */
  async function mix(size: number): Promise<void> {
    const RESOURCES = 200;
    const USERS = 20;
    const WORKING_SET = 8;
    const ids = Array.from({ length: RESOURCES }, (_, i) => `mix_${i}`);
    await register(ids);
    const store = new ApiKeyStore(redis);
    const users = await Promise.all(
      Array.from({ length: USERS }, async (_, i) => {
        const { secret } = await store.create({
          org: "bench",
          owner: `mix_user_${i}`,
          permissions: [...DEFAULT_PERMISSIONS],
        });
        return { name: `mix_user_${i}`, secret };
      }),
    );
    // Each user mostly reads the few files they work on; now and then a popular one (the first
    // files far more often than the rest).
    const popular = () => ids[Math.floor(RESOURCES * Math.random() ** 2)]!;
    const working = (user: number) =>
      ids[(user * 7 + Math.floor(Math.random() * WORKING_SET) * 13) % RESOURCES]!;
    let checks = 0;
    let grants = 0;
    const run = async (seconds: number) => {
      const end = performance.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (performance.now() < end) {
            const u = Math.floor(Math.random() * USERS);
            const user = users[u]!;
            if (Math.random() < 0.01) {
              const body = { resourceType: "file", resourceId: popular(), userId: user.name, role: "reader" };
              await post(cached, Math.random() < 0.5 ? "grant" : "revoke", body);
              grants++;
            } else {
              const role = Math.random() < 0.8 ? "reader" : "writer";
              const file = Math.random() < 0.9 ? working(u) : popular();
              const res = await fetch(
                `${cached.url}${CHECK}?resourceType=file&resourceId=${file}&role=${role}`,
                {
                  headers: { authorization: `Bearer ${user.secret}` },
                },
              );
              await res.arrayBuffer();
              checks++;
            }
          }
        }),
      );
    };
    await run(MIX_WARMUP_SECONDS);
    [checks, grants] = [0, 0];
    const before = await cacheCounts(cached);
    await run(MIX_SECONDS);
    const after = await cacheCounts(cached);
    const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
    const lookups = delta("hit") + delta("miss") + delta("bypass");
    const share = (name: string) => `${((delta(name) / Math.max(1, lookups)) * 100).toFixed(1)} %`;
    report.section(
      "Decision cache under a mix of reads and grants",
      `${MIX_SECONDS} s after ${MIX_WARMUP_SECONDS} s of warm-up, 16 callers, ${size.toLocaleString("en")} other relationships: ${USERS} users (each its own API key) check reader (80 %) or writer (20 %) on ${RESOURCES} files, 90 % of the time one of the ${WORKING_SET} files they work on, else a popular one (index = ${RESOURCES} × random²); 1 % of operations are a grant or revoke of reader on a popular file by its owner. Default settings: kept at most 5 s, not used within 6 s of a write to the resource. Counted by the gateway (\`gateway_decision_cache_*\`).`,
    );
    report.table(
      [
        "checks",
        "grants and revokes",
        "checks/s",
        "hit",
        "miss",
        "bypass (right after a write)",
        "invalidated: write / max_age / grant_expiry",
      ],
      [
        [
          checks,
          grants,
          (checks / MIX_SECONDS).toFixed(0),
          share("hit"),
          share("miss"),
          share("bypass"),
          `${delta("write")} / ${delta("max_age")} / ${delta("grant_expiry")}`,
        ],
      ],
    );
  }
}
