/**
 * The gateway's hot path beside its baselines, in one run: a bare Express
 * app answering the same JSON, and authzed-node calling the same SpiceDB
 * directly. Also: Redis commands per rate-limit decision, exactness across
 * two replicas, memory, and where the gateway's time goes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scopedId, subjectContext, v1 } from "@gw/core/authz";
import type { Limits } from "@gw/core/limits";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { freePort, type RunningNodeProcess, startNodeProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { generateSigningJwk, loadSigningKeys } from "../../packages/gateway/src/tokens/signing-keys.ts";
import { TokenService } from "../../packages/gateway/src/tokens/tokens.ts";
import { benchChecks } from "./checks.ts";
import {
  directClient,
  load,
  rssMiB,
  type Sample,
  type Stack,
  sideBySide,
  startGatewayOf,
  startStack,
  withCpu,
} from "./http.ts";
import { summarizeProfile, topFunctions } from "./profile.ts";
import type { Report } from "./report.ts";

const WHOAMI = "/api/v1/authentication/whoami";
const EXCHANGE = "/api/v1/authentication/api-keys/exchange-token";
const CHECK = "/api/v1/authorization/llm/check";

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
  const extra: RunningNodeProcess[] = [];
  try {
    const [gw, second] = stack.gateways as [Stack["gateways"][0], Stack["gateways"][0]];
    // Beside the default gateway (ES256 development key, decision cache on): one signing with EdDSA,
    // and one without the decision cache, as checks were before it.
    const eddsa = await startGatewayOf(stack, "gateway-eddsa", {
      JWT_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk("EdDSA")] }),
    });
    const uncached = await startGatewayOf(stack, "gateway-uncached", { DECISION_CACHE_SIZE: "0" });
    // And one without the per-request access line, to show what that line costs.
    const quiet = await startGatewayOf(stack, "gateway-quiet", { LOG_LEVEL: "warn" });
    extra.push(eddsa, uncached, quiet);
    const rssAtStart = await rssMiB(gw.process.pid!);
    let served = 0;
    const count = (s: Sample) => {
      served += s.total;
      return s;
    };
    const on =
      (gateway: RunningNodeProcess, path: string, options: Parameters<typeof load>[0] = { url: "" }) =>
      () =>
        withCpu(gateway.process.pid!, () => load({ ...options, url: `${gateway.url}${path}` })).then(
          gateway === gw ? count : (s) => s,
        );
    const onGateway = (path: string, options: Parameters<typeof load>[0] = { url: "" }) =>
      on(gw, path, options);
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
      0.7,
    );
    await pair(
      "`GET …/whoami`, API key with limits, no access line (`LOG_LEVEL=warn`)",
      on(quiet, WHOAMI, { url: "", headers: bearer(stack.limitedKey) }),
      onBare(WHOAMI),
      "bare Express",
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
    const exchange = {
      url: "",
      method: "POST" as const,
      headers: { ...bearer(stack.limitedKey), "content-type": "application/json" },
      body: exchangeBody,
    };
    const bareExchange = onBare(EXCHANGE, {
      url: "",
      method: "POST",
      headers: { "content-type": "application/json" },
      body: exchangeBody,
    });
    await pair(
      "`POST …/exchange-token`, ES256",
      onGateway(EXCHANGE, exchange),
      bareExchange,
      "bare Express",
      0.4,
    );
    await pair(
      "`POST …/exchange-token`, EdDSA",
      on(eddsa, EXCHANGE, exchange),
      bareExchange,
      "bare Express",
      0.4,
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
    const directCheck = () =>
      loadDirect(
        () => direct.promises.checkPermission(request),
        50,
        Number(process.env.BENCH_ROUND_SECONDS ?? 3),
      );
    const checkPath = `${CHECK}?resourceType=file&resourceId=bench_file&role=reader`;
    await pair(
      "`GET …/check`, repeated (decision cache hit)",
      onGateway(checkPath, { url: "", headers: bearer(stack.limitedKey) }),
      directCheck,
      "authzed-node `CheckPermission`",
      5,
    );
    // A first check: a resource never asked about, each request (the cache misses every time).
    let first = 0;
    const firstChecks = {
      url: "",
      headers: bearer(stack.limitedKey),
      pathOf: () => `${CHECK}?resourceType=file&resourceId=first_${first++}&role=reader`,
    };
    await pair(
      "`GET …/check`, a first check (cache miss)",
      onGateway(CHECK, firstChecks),
      on(uncached, CHECK, firstChecks),
      "the same without the cache (`DECISION_CACHE_SIZE=0`)",
      0.95,
    );
    await pair(
      "`GET …/check`, without the cache (`DECISION_CACHE_SIZE=0`)",
      on(uncached, checkPath, { url: "", headers: bearer(stack.limitedKey) }),
      directCheck,
      "authzed-node `CheckPermission`",
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

    const row = (prefix: string) => rows.find((r) => r.scenario.startsWith(prefix))!;
    const whoami = row("`GET …/whoami`, API key with limits");
    const quietRow = row("`GET …/whoami`, API key with limits, no access line");
    if (whoami.gateway.cpuUs !== undefined && whoami.baseline.cpuUs !== undefined) {
      const [g, b] = [whoami.gateway.cpuUs, whoami.baseline.cpuUs];
      report.line(
        `Reading: the load generator and the servers share this machine's cores, so req/s follows the CPU each request costs the server. Bare Express spends ${b.toFixed(1)} µs of CPU per \`whoami\`, the gateway ${g.toFixed(1)} µs (×${(b / g).toFixed(2)}). ×0.7 would leave the gateway ${(b / 0.7 - b).toFixed(1)} µs for all it does beyond Express: the bearer's SHA-256 and cache lookup, the principal, the rate-limit decision (a lease, most of the time), two rate-limit headers and a request id, the HTTP metrics and one JSON log line. The access line alone costs ${((quietRow.gateway.cpuUs ?? 0) > 0 ? g - quietRow.gateway.cpuUs! : 0).toFixed(1)} µs of it (the same gateway at \`LOG_LEVEL=warn\`: ${quietRow.gateway.cpuUs?.toFixed(1)} µs, ×${(quietRow.gateway.rps / quietRow.baseline.rps).toFixed(2)}): pino's serialization and a write to the log file, which the threads of Node's pool do as the process's own CPU. The profile below shows where the rest goes; most of it is Node's own HTTP work and the kernel's socket writes, which bare Express pays as well.`,
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
    const [es, ed] = [row("`POST …/exchange-token`, ES256"), row("`POST …/exchange-token`, EdDSA")];
    const [esUs, edUs] = [signing[0]![1], signing[1]![1]];
    const cheaper = edUs <= esUs ? "EdDSA (Ed25519)" : "ES256";
    report.line(
      `Token exchange: signing one token alone takes ${signing.map(([alg, us]) => `${us.toFixed(0)} µs (${alg})`).join(", ")} of CPU here; with the bearer's authentication, the JSON body and its validation, the gateway spends ${es.gateway.cpuUs?.toFixed(0)} µs (ES256), ${ed.gateway.cpuUs?.toFixed(0)} µs (EdDSA) per exchange where bare Express parses the body and answers a fixed string in ${es.baseline.cpuUs?.toFixed(0)} µs. ×0.4 needs the whole exchange in ${((es.baseline.cpuUs ?? 0) / 0.4).toFixed(0)} µs. New deployments should sign with ${cheaper}, the cheaper signature here (×${(Math.max(esUs, edUs) / Math.min(esUs, edUs)).toFixed(2)}; EdDSA signatures are also deterministic, with no per-signature nonce), unless a verifier of their tokens accepts only ES256; \`JWT_SIGNING_KEYS\` may hold both while verifiers move.`,
    );
    const hit = row("`GET …/check`, repeated");
    const miss = row("`GET …/check`, a first check");
    const off = row("`GET …/check`, without the cache");
    report.line(
      `Check: a decision cache hit costs the gateway ${hit.gateway.cpuUs?.toFixed(0)} µs of CPU (authentication, the rate limit, one Redis round trip for the resource's ZedToken and grant expiries, which is the cache's validity check) and no SpiceDB call; a miss ${miss.gateway.cpuUs?.toFixed(0)} µs, where the gateway without the cache spends ${miss.baseline.cpuUs?.toFixed(0)} µs on the same first check. Without the cache SpiceDB's engine, on the same cores, is the bottleneck (×${(off.gateway.rps / off.baseline.rps).toFixed(2)} of a direct \`CheckPermission\`, whose gRPC client runs in the load generator).`,
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

    await benchChecks(report, stack, gw, uncached);

    await profileHotPaths(report, stack);
  } finally {
    await Promise.all(extra.map((g) => g.stop()));
    await stack.close();
  }
}

/**
 * Gateways started with `--cpu-prof` under the loads whose goals are hard to
 * reach (whoami, token exchange, a cached check): where their time goes, by
 * group and by function.
 */
async function profileHotPaths(report: Report, stack: Stack): Promise<void> {
  const bearer = { authorization: `Bearer ${stack.limitedKey}` };
  const loads: [string, string, Omit<Parameters<typeof load>[0], "url">][] = [
    ["`whoami` with a limited API key", WHOAMI, { headers: bearer }],
    [
      "token exchange (ES256)",
      EXCHANGE,
      {
        method: "POST",
        headers: { ...bearer, "content-type": "application/json" },
        body: JSON.stringify({ audience: "https://agents.bench", externalUserId: "alice" }),
      },
    ],
    [
      "a repeated check (decision cache hit)",
      `${CHECK}?resourceType=file&resourceId=bench_file&role=reader`,
      { headers: bearer },
    ],
  ];
  for (const [name, path, options] of loads) {
    const dir = await mkdtemp(join(tmpdir(), "gw-bench-prof-"));
    const profiled = await startNodeProcess({
      name: "gateway-profiled",
      entry: "packages/gateway/src/main.ts",
      port: await freePort(),
      env: { ...stack.gatewayEnv, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}` },
      outputFile: join(dir, "gateway.log"),
    });
    try {
      await load({ ...options, url: `${profiled.url}${path}`, seconds: 2 });
      await load({ ...options, url: `${profiled.url}${path}`, seconds: 6 });
    } finally {
      await profiled.stop();
    }
    const groups = await summarizeProfile(dir);
    const functions = await topFunctions(dir);
    await rm(dir, { recursive: true, force: true });
    report.section(
      `Where the gateway's time goes: ${name}`,
      "CPU profile (`node --cpu-prof`) of a gateway under this load, self time by group, then the functions of this project and its packages that take most (Node's and the kernel's left out). Start-up is included.",
    );
    report.table(
      ["", "share"],
      groups.map(([group, share]) => [group, `${(share * 100).toFixed(1)} %`]),
    );
    report.table(
      ["function", "share"],
      functions.map(([fn, share]) => [fn, `${(share * 100).toFixed(2)} %`]),
    );
  }
}
