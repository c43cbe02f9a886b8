/**
 * The gateway's hot path beside its baselines, in one run: a bare Express
 * app answering the same JSON, and authzed-node calling the same SpiceDB
 * directly. Also: Redis commands per rate-limit decision, exactness across
 * two replicas, memory, and where the gateway's time goes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRedis, DEFAULT_PERMISSIONS, type Limits, scopedId, subjectContext, v1 } from "@gw/core";
import { freePort, startNodeProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { generateSigningJwk, loadSigningKeys } from "../../packages/gateway/src/tokens/signing-keys.ts";
import { TokenService } from "../../packages/gateway/src/tokens/tokens.ts";
import {
  directClient,
  load,
  rssMiB,
  type Sample,
  type Stack,
  sideBySide,
  startStack,
  withCpu,
} from "./http.ts";
import { summarizeProfile } from "./profile.ts";
import type { Report } from "./report.ts";

const WHOAMI = "/api/v1/authentication/whoami";
const EXCHANGE = "/api/v1/authentication/api-keys/exchange-token";

interface Row {
  scenario: string;
  gateway: Sample;
  baseline: Sample;
  baselineName: string;
  goal?: number;
}

const fmt = (s: Sample) =>
  `${s.rps.toFixed(0)} (${s.p50.toFixed(1)} / ${s.p99.toFixed(1)} ms)${s.cpuUs === undefined ? "" : `, ${s.cpuUs.toFixed(1)} µs CPU`}`;

/** Runs `call` with `connections` concurrent callers for `seconds`: the direct SpiceDB baseline. */
async function loadDirect(
  call: () => Promise<unknown>,
  connections: number,
  seconds: number,
): Promise<Sample> {
  const latencies: number[] = [];
  let failures = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const started = performance.now();
        try {
          await call();
        } catch {
          failures++;
        }
        latencies.push(performance.now() - started);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    rps: latencies.length / seconds,
    p50: at(0.5),
    p99: at(0.99),
    non2xx: failures,
    total: latencies.length,
  };
}

async function redisCommands(stack: Stack): Promise<Map<string, number>> {
  const client = createRedis(stack.redis.url, { connectionName: "bench-stats" });
  const info = await client.info("commandstats");
  client.disconnect();
  return new Map(
    [...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])] as [string, number]),
  );
}

/** Script runs (decisions, leases and give-backs) between two commandstats readings. */
function scriptCalls(before: Map<string, number>, after: Map<string, number>): number {
  let calls = 0;
  for (const name of ["evalsha", "eval", "evalsha_ro", "eval_ro"])
    calls += (after.get(name) ?? 0) - (before.get(name) ?? 0);
  return calls;
}

async function newKey(stack: Stack, limits: Limits): Promise<string> {
  const client = createRedis(stack.redis.url, { connectionName: "bench-keys" });
  const { secret } = await new ApiKeyStore(client).create({
    org: "bench",
    owner: "alice",
    permissions: [...DEFAULT_PERMISSIONS],
    limits,
  });
  client.disconnect();
  return secret;
}

export async function benchGateway(report: Report): Promise<void> {
  const stack = await startStack(2);
  try {
    const [gw, second] = stack.gateways as [Stack["gateways"][0], Stack["gateways"][0]];
    const rssAtStart = await rssMiB(gw.process.pid!);
    let served = 0;
    const count = (s: Sample) => {
      served += s.total;
      return s;
    };
    const onGateway =
      (path: string, options: Parameters<typeof load>[0] = { url: "" }) =>
      () =>
        withCpu(gw.process.pid!, () => load({ ...options, url: `${gw.url}${path}` })).then(count);
    const onBare =
      (path: string, options: Parameters<typeof load>[0] = { url: "" }) =>
      () =>
        withCpu(stack.bare.process.pid!, () => load({ ...options, url: `${stack.bare.url}${path}` }));
    const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

    // The file the check scenario asks about, registered first: by then its write is no longer
    // "recent", and checks ask SpiceDB for its ZedToken, as they do in steady state.
    const registered = await fetch(`${gw.url}/api/v1/authorization/llm/resources`, {
      method: "POST",
      headers: { ...bearer(stack.limitedKey), "content-type": "application/json" },
      body: JSON.stringify({ resourceType: "file", resourceId: "bench_file" }),
    });
    if (registered.status !== 201) throw new Error(`register answered ${registered.status}`);
    const rows: Row[] = [];
    const pair = async (
      scenario: string,
      gateway: () => Promise<Sample>,
      baseline: () => Promise<Sample>,
      baselineName: string,
      goal?: number,
    ) => {
      const [g, b] = await sideBySide(gateway, baseline);
      rows.push({ scenario, gateway: g, baseline: b, baselineName, ...(goal ? { goal } : {}) });
      console.log(`  ${scenario}: ×${(g.rps / b.rps).toFixed(2)}`);
    };

    console.log("\nGateway hot path (this takes a few minutes)");
    await pair(
      "`GET …/whoami`, API key with limits",
      onGateway(WHOAMI, { url: "", headers: bearer(stack.limitedKey) }),
      onBare(WHOAMI),
      "bare Express",
      0.8,
    );
    await pair(
      "`GET …/whoami`, API key without limits",
      onGateway(WHOAMI, { url: "", headers: bearer(stack.unlimitedKey) }),
      onBare(WHOAMI),
      "bare Express",
    );
    await pair(
      "`GET …/whoami`, gateway JWT",
      onGateway(WHOAMI, { url: "", headers: bearer(stack.token) }),
      onBare(WHOAMI),
      "bare Express",
      0.7,
    );
    const exchangeBody = JSON.stringify({ audience: "https://agents.bench", externalUserId: "alice" });
    await pair(
      "`POST …/exchange-token`",
      onGateway(EXCHANGE, {
        url: "",
        method: "POST",
        headers: { ...bearer(stack.limitedKey), "content-type": "application/json" },
        body: exchangeBody,
      }),
      onBare(EXCHANGE, {
        url: "",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: exchangeBody,
      }),
      "bare Express",
      0.6,
    );

    const direct = directClient(stack.spicedbEndpoint);
    const request = v1.CheckPermissionRequest.create({
      resource: v1.ObjectReference.create({ objectType: "file", objectId: scopedId("bench", "bench_file") }),
      permission: "read",
      subject: v1.SubjectReference.create({
        object: v1.ObjectReference.create({ objectType: "user", objectId: scopedId("bench", "alice") }),
      }),
      context: subjectContext("bench"),
    });
    await pair(
      "`GET …/authorization/llm/check`",
      onGateway("/api/v1/authorization/llm/check?resourceType=file&resourceId=bench_file&role=reader", {
        url: "",
        headers: bearer(stack.limitedKey),
      }),
      () =>
        loadDirect(
          () => direct.promises.checkPermission(request),
          50,
          Number(process.env.BENCH_ROUND_SECONDS ?? 3),
        ),
      "authzed-node `CheckPermission`",
      0.9,
    );
    direct.close();

    report.section(
      "Gateway beside its baselines",
      "`autocannon`, 50 connections on loopback, each side run alternately (a warm-up, then rounds of A and B); req/s (p50 / p99 latency), and the CPU time the serving process spent per request. The gateway logs one info line per request, as in production (to a file).",
    );
    report.table(
      ["scenario", "gateway", "baseline", "ratio", "goal"],
      rows.map((r) => {
        const ratio = r.gateway.rps / r.baseline.rps;
        const goal = r.goal ? `≥ ${r.goal} ${ratio >= r.goal ? "met" : "**not met**"}` : "";
        return [
          r.scenario,
          fmt(r.gateway),
          `${r.baselineName}: ${fmt(r.baseline)}`,
          `×${ratio.toFixed(2)}`,
          goal,
        ];
      }),
    );

    const whoami = rows[0]!;
    if (whoami.gateway.cpuUs !== undefined && whoami.baseline.cpuUs !== undefined) {
      const [g, b] = [whoami.gateway.cpuUs, whoami.baseline.cpuUs];
      report.line(
        `Reading: the load generator and the servers share this machine's cores, so req/s follows the CPU each request costs the server. Bare Express spends ${b.toFixed(1)} µs of CPU per \`whoami\`, the gateway ${g.toFixed(1)} µs (×${(b / g).toFixed(2)}). ×0.8 would leave the gateway ${(b / 0.8 - b).toFixed(1)} µs for all it does beyond Express: the bearer's SHA-256 and cache lookup, the principal, the rate-limit decision (a lease, most of the time), two rate-limit headers and a request id, the HTTP metrics and one JSON log line. The profile below shows where the time goes; most of it is Node's own HTTP work and the kernel's socket writes, which bare Express pays as well.`,
      );
    }

    // What one signature costs, alone: the floor under token exchange.
    const signing: [string, number][] = [];
    for (const alg of ["ES256", "EdDSA"] as const) {
      const tokens = new TokenService(
        await loadSigningKeys(JSON.stringify({ keys: [await generateSigningJwk(alg)] })),
        "http://gateway.bench",
      );
      const claims = {
        sub: "alice",
        aud: "https://agents.bench",
        org: "bench",
        keyId: "key_x",
        permissions: [],
      };
      const started = performance.now();
      for (let i = 0; i < 2_000; i++) await tokens.sign(claims, 3600);
      signing.push([alg, ((performance.now() - started) * 1000) / 2_000]);
    }
    const exchange = rows[3]!;
    report.line(
      `Token exchange: signing one token alone takes ${signing.map(([alg, us]) => `${us.toFixed(0)} µs (${alg})`).join(", ")} of CPU here; with the bearer's authentication, the JSON body and its validation, the gateway spends ${exchange.gateway.cpuUs?.toFixed(0)} µs per exchange where bare Express parses the body and answers a fixed string in ${exchange.baseline.cpuUs?.toFixed(0)} µs. ×0.6 would need the whole exchange in ${((exchange.baseline.cpuUs ?? 0) / 0.6).toFixed(0)} µs.`,
    );
    const check = rows[4]!;
    report.line(
      `Check: SpiceDB's engine, on the same cores, is the bottleneck; the gateway spends ${check.gateway.cpuUs?.toFixed(0)} µs of CPU per check (authentication, the ZedToken from Redis, the gRPC call through grpc-js and protobuf), CPU the engine then does not have. The direct baseline pays its own gRPC client in the load generator.`,
    );

    // Added latency, one request at a time.
    const [g1, b1] = await sideBySide(
      onGateway(WHOAMI, { url: "", headers: bearer(stack.limitedKey), connections: 1 }),
      onBare(WHOAMI, { url: "", connections: 1 }),
    );
    const added = 1000 / g1.rps - 1000 / b1.rps;
    report.section("Added latency, one connection");
    report.table(
      ["", "gateway", "bare Express", "added per request", "goal"],
      [
        [
          "`GET …/whoami`, API key with limits",
          fmt(g1),
          fmt(b1),
          `${added.toFixed(3)} ms`,
          `< 0.2 ms ${added < 0.2 ? "met" : "**not met**"}`,
        ],
      ],
    );

    // Redis commands per decision.
    const perKey = async (limits: Limits, amount: number, connections: number) => {
      const key = await newKey(stack, limits);
      const before = await redisCommands(stack);
      const result = await load({
        url: `${gw.url}${WHOAMI}`,
        headers: bearer(key),
        amount,
        connections,
      });
      count(result);
      const after = await redisCommands(stack);
      return { calls: scriptCalls(before, after), result };
    };
    const heavy = await perKey({ second: 1_000_000, day: 1_000_000_000 }, 20_000, 50);
    const light = await perKey({ day: 199 }, 400, 1);
    report.section(
      "Redis round trips per rate-limit decision",
      "Script runs counted by Redis itself (`INFO commandstats`) during a fixed number of requests of one key.",
    );
    report.table(
      ["key", "requests", "admitted", "refused", "script runs", "per request"],
      [
        [
          "heavy (second=1000000, day=1000000000): leases of 64",
          heavy.result.total,
          heavy.result.total - heavy.result.non2xx,
          heavy.result.non2xx,
          heavy.calls,
          (heavy.calls / heavy.result.total).toFixed(3),
        ],
        [
          "light (day=199): one decision per request; refusals remembered until the day ends",
          light.result.total,
          light.result.total - light.result.non2xx,
          light.result.non2xx,
          light.calls,
          (light.calls / light.result.total).toFixed(3),
        ],
      ],
    );

    // Exactness across two replicas: bursts against second=50, each inside one window.
    const exactKey = await newKey(stack, { second: 50 });
    const admitted: number[] = [];
    for (let burst = 0; burst < 6; burst++) {
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          fetch(`${(i % 2 ? second : gw).url}${WHOAMI}`, { headers: bearer(exactKey) }).then((r) => r.status),
        ),
      );
      admitted.push(responses.filter((s) => s === 200).length);
      await new Promise((r) => setTimeout(r, 1_100));
    }
    report.section(
      "Exactness across replicas",
      "Two gateway processes on one Redis; bursts of 200 requests (alternating replicas) against `second=50`, each burst inside one window, 1.1 s apart.",
    );
    report.table(
      ["burst", ...admitted.map((_, i) => String(i + 1))],
      [["admitted (≤ 50 each)", ...admitted.map(String)]],
    );

    const memory: string[][] = [
      ["after start", `${rssAtStart.toFixed(0)} MiB`],
      [`after ${served.toLocaleString("en")} requests`, `${(await rssMiB(gw.process.pid!)).toFixed(0)} MiB`],
    ];
    // BENCH_SOAK=1: keep serving whoami up to a million requests, noting memory every 100 000.
    if (process.env.BENCH_SOAK) {
      let mark = Math.ceil(served / 100_000) * 100_000;
      while (served < 1_000_000) {
        count(await load({ url: `${gw.url}${WHOAMI}`, headers: bearer(stack.limitedKey), amount: 25_000 }));
        if (served >= mark) {
          memory.push([
            `after ${served.toLocaleString("en")} requests`,
            `${(await rssMiB(gw.process.pid!)).toFixed(0)} MiB`,
          ]);
          mark += 100_000;
        }
      }
    }
    report.section("Gateway memory", "Resident memory of the gateway process (`VmRSS`).");
    report.table(["", "resident memory"], memory);

    await profileWhoami(report, stack);
  } finally {
    await stack.close();
  }
}

/** A gateway started with `--cpu-prof` under the whoami load: where its time goes. */
async function profileWhoami(report: Report, stack: Stack): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "gw-bench-prof-"));
  const env = { ...stack.gatewayEnv, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}` };
  const profiled = await startNodeProcess({
    name: "gateway-profiled",
    entry: "packages/gateway/src/main.ts",
    port: await freePort(),
    env,
    outputFile: join(dir, "gateway.log"),
  });
  try {
    await load({
      url: `${profiled.url}${WHOAMI}`,
      headers: { authorization: `Bearer ${stack.limitedKey}` },
      seconds: 2,
    });
    await load({
      url: `${profiled.url}${WHOAMI}`,
      headers: { authorization: `Bearer ${stack.limitedKey}` },
      seconds: 6,
    });
  } finally {
    await profiled.stop();
  }
  const groups = await summarizeProfile(dir);
  await rm(dir, { recursive: true, force: true });
  report.section(
    "Where the gateway's time goes",
    "CPU profile (`node --cpu-prof`) of a gateway under the `whoami` load with a limited API key, self time by group. Start-up is included.",
  );
  report.table(
    ["", "share"],
    groups.map(([group, share]) => [group, `${(share * 100).toFixed(1)} %`]),
  );
}
