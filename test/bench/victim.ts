/**
 * No tenant waits behind another: a victim key's small calls, alone and
 * beside twenty concurrent 1 MB calls of another organization's key, through
 * gateway and service (each its own process), side by side in one run. The
 * victim's calls alternate a small chat completion and a small
 * `POST /responses/input_tokens`; the attack is, in turn, `input_tokens`,
 * chat completions, and chat completions on a key with a token budget (whose
 * reservation counts the prompt), each with about 1 MB of English text for
 * `gpt-4o` (its tokenizer counts it), from a worker thread of its own so the
 * victim's timings are not taken on the attack's event loop. Rounds alternate
 * alone and attacked. The provider is `short-provider.ts`, which answers a
 * few words whatever it is sent: the test kit's fake provider parses, keeps
 * and echoes every request, so twenty 1 MB calls would measure it.
 *
 * `BENCH_VICTIM_CALLS` victim calls of each kind per round (default 40),
 * `BENCH_VICTIM_ROUNDS` rounds per attack (default 2). Alone:
 * `pnpm exec node test/bench/victim.ts` (prints; `BENCH_OUTPUT` writes a report).
 */
import { Worker } from "node:worker_threads";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { freePort, startNodeProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { bearer, CHAT, p50, startModelStack, timedCall } from "./model-calls.ts";
import { Report } from "./report.ts";

const CALLS = Number(process.env.BENCH_VICTIM_CALLS ?? 40);
const ROUNDS = Number(process.env.BENCH_VICTIM_ROUNDS ?? 2);
const ATTACKERS = 20;
const COUNT = "/api/v1/llm/responses/input_tokens";
/** The goal: a victim's p50 beside the attack. */
const GOAL_MS = 100;

/** The attack's loop, in a worker thread: `concurrency` callers, each sending its next call once answered. */
const ATTACK = `
const { parentPort, workerData } = require("node:worker_threads");
const { url, headers, body, concurrency } = workerData;
let stop = false, done = 0, failed = 0;
parentPort.on("message", () => { stop = true; });
(async () => {
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (!stop) {
      try {
        const res = await fetch(url, { method: "POST", headers, body });
        await res.arrayBuffer();
        if (res.ok) done++; else failed++;
      } catch { failed++; }
    }
  }));
  parentPort.postMessage({ done, failed });
})();
`;

/** Starts the attack; `stop` ends it once every caller's call in flight is answered, with the count of calls. */
function startAttack(url: string, headers: Record<string, string>, body: string) {
  const worker = new Worker(ATTACK, {
    eval: true,
    workerData: { url, headers, body, concurrency: ATTACKERS },
  });
  const started = performance.now();
  return {
    stop: () =>
      new Promise<{ perSecond: number; failed: number }>((resolve) => {
        worker.once("message", (m: { done: number; failed: number }) => {
          const seconds = (performance.now() - started) / 1000;
          void worker.terminate();
          resolve({ perSecond: m.done / seconds, failed: m.failed });
        });
        worker.postMessage("stop");
      }),
  };
}

export async function benchVictim(report: Report): Promise<void> {
  const stack = await startModelStack();
  const provider = await startNodeProcess({
    name: "short-provider",
    entry: "test/bench/short-provider.ts",
    port: await freePort(),
    env: { PATH: process.env.PATH },
  });
  try {
    const pair = await stack.startPair("victim", { LLM_BASE_URL: `${provider.url}/v1` });
    const client = createRedis(stack.redisUrl, { connectionName: "bench-victim" });
    const store = new ApiKeyStore(client);
    const permissions = [...DEFAULT_PERMISSIONS];
    const key = (org: string, owner: string, budget = false) =>
      store
        .create({
          org,
          owner,
          permissions,
          ...(budget ? { limits: { tokens: { minute: 1e12, day: 1e12 } } } : {}),
        })
        .then((k) => ({ ...bearer(k.secret), "x-on-behalf-of": owner }));
    const victim = await key("victim", "vera");
    const attacker = await key("attacker", "mallory");
    const budgeted = await key("attacker", "mallory", true);
    client.disconnect();

    const victimCalls = {
      chat: () =>
        timedCall(
          `${pair.gateway.url}${CHAT}`,
          victim,
          JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "Hi" }] }),
        ),
      count: () =>
        timedCall(
          `${pair.gateway.url}${COUNT}`,
          victim,
          JSON.stringify({ model: "gpt-4o", input: "What is the capital of France?" }),
        ),
    };
    const sentence = "The quick brown fox jumps over the lazy dog. ";
    const text = sentence.repeat(Math.floor(1_000_000 / sentence.length));
    const chat = JSON.stringify({
      model: "gpt-4o",
      max_tokens: 16,
      messages: [{ role: "user", content: text }],
    });
    const attacks = [
      {
        name: "`input_tokens`",
        url: `${pair.gateway.url}${COUNT}`,
        headers: attacker,
        body: JSON.stringify({ model: "gpt-4o", input: text }),
      },
      { name: "chat completions", url: `${pair.gateway.url}${CHAT}`, headers: attacker, body: chat },
      {
        name: "chat completions, token budget",
        url: `${pair.gateway.url}${CHAT}`,
        headers: budgeted,
        body: chat,
      },
    ];

    /** `CALLS` of each victim call, alternating; their latencies. */
    const victimRound = async (into: { chat: number[]; count: number[] }) => {
      for (let i = 0; i < CALLS; i++) {
        into.chat.push(await victimCalls.chat());
        into.count.push(await victimCalls.count());
      }
    };
    for (let i = 0; i < 20; i++) await victimRound({ chat: [], count: [] }).catch(() => undefined);

    const rows: (string | number)[][] = [];
    const rates: string[] = [];
    for (const attack of attacks) {
      const alone = { chat: [] as number[], count: [] as number[] };
      const attacked = { chat: [] as number[], count: [] as number[] };
      let perSecond = 0;
      let failed = 0;
      for (let round = 0; round < ROUNDS; round++) {
        await victimRound(alone);
        const running = startAttack(attack.url, attack.headers, attack.body);
        // The attack's calls in flight before the victim's are timed.
        await new Promise((r) => setTimeout(r, 1_500));
        await victimRound(attacked);
        const result = await running.stop();
        perSecond += result.perSecond / ROUNDS;
        failed += result.failed;
      }
      for (const [victimName, of] of [
        ["chat completion", "chat"],
        ["`input_tokens`", "count"],
      ] as const) {
        const [a, b] = [p50(alone[of]), p50(attacked[of])];
        rows.push([
          attack.name,
          victimName,
          `${a.toFixed(1)} ms`,
          `${b.toFixed(1)} ms`,
          `${(Math.round((b - a) * 10) / 10).toFixed(1)} ms`,
          `×${(b / a).toFixed(1)}`,
          b <= GOAL_MS ? "met" : "**not met**",
        ]);
      }
      rates.push(
        `${attack.name}: ${perSecond.toFixed(1)} calls/s answered${failed ? `, ${failed} failed` : ""}`,
      );
    }
    report.section(
      "No tenant waits behind another: a victim's p50 beside twenty 1 MB calls",
      `A victim key's small calls (a chat completion of one word, an \`input_tokens\` of one sentence, alternating, ${CALLS} of each per round) alone and while another organization's key keeps ${ATTACKERS} calls of about 1 MB of English text for \`gpt-4o\` in flight (each caller sends its next once answered), through gateway and service; ${ROUNDS} rounds of each, alone and attacked alternating, p50 over the rounds. The provider answers a few words whatever it is sent (\`test/bench/short-provider.ts\`). Goal: the victim's p50 beside the attack at most ${GOAL_MS} ms.`,
    );
    report.table(
      [
        "attack (20 concurrent, 1 MB each)",
        "victim's call",
        "alone",
        "beside the attack",
        "added",
        "ratio",
        "goal",
      ],
      rows,
    );
    report.line(`The attack's throughput: ${rates.join("; ")}.`);
  } finally {
    await provider.stop();
    await stack.close();
  }
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load0 = loadavg() as [number, number, number];
  await benchVictim(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load0);
  process.exit(0);
}
