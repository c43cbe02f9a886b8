import { afterAll, describe, expect, it } from "vitest";
import { countAllNow } from "./token-count.ts";
import { TokenPool } from "./token-pool.ts";
import { configureTokenCounting, countPromptTokens, DEFAULT_TOKEN_COUNTING } from "./tokens.ts";

/**
 * Large prompts are counted by worker threads, so the event loop does no
 * work that grows with a prompt; the counts are the ones the event loop
 * would have made.
 */
const sentence = "The quick brown fox jumps over the lazy dog; 1,234 times — naïve café 日本語. ";
const english = (chars: number) => sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);

const pools: TokenPool[] = [];
const poolOf = (workers: number, timeoutMs = 60_000) => {
  const pool = new TokenPool(workers, timeoutMs);
  pools.push(pool);
  return pool;
};
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  configureTokenCounting(DEFAULT_TOKEN_COUNTING);
});

describe("the token-counting pool", () => {
  it("counts what the event loop would count", async () => {
    const pool = poolOf(2);
    const texts = [english(50_000), "😀".repeat(3_000), " ".repeat(5_000), "<|endoftext|> as text"];
    for (const tokenizer of ["o200k_base", "cl100k_base"] as const)
      expect(await pool.count("acme", tokenizer, texts)).toBe(countAllNow(tokenizer, texts));
  });

  it("serves the tenant served longest ago first: one tenant's queue does not hold another's job", async () => {
    const pool = poolOf(1);
    const finished: string[] = [];
    const job = (tenant: string, name: string) =>
      pool.count(tenant, "o200k_base", [english(20_000)]).then(() => finished.push(name));
    const all = [job("a", "a1"), job("a", "a2"), job("a", "a3"), job("a", "a4"), job("b", "b1")];
    await Promise.all(all);
    // a1 was running when b1 came; b1 went next, before the rest of a's queue.
    expect(finished).toEqual(["a1", "b1", "a2", "a3", "a4"]);
  });

  it("fails a count past its deadline with 503, running or waiting, and goes on with a fresh worker", async () => {
    const pool = poolOf(1, 20);
    // About 8 MB of text: far longer than 20 ms to count on any machine.
    const huge = english(8_000_000);
    const outcomes = await Promise.allSettled([
      pool.count("a", "o200k_base", [huge]),
      pool.count("b", "o200k_base", [huge]),
    ]);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: "service_unavailable" });
    }
    const patient = poolOf(1);
    expect(await patient.count("a", "o200k_base", ["hello there"])).toBe(2);
  });
});

describe("countPromptTokens", () => {
  const large = { model: "gpt-4o", messages: [{ role: "user" as const, content: english(400_000) }] };

  it("counts a large prompt off the event loop: this thread spends a fraction of what counting it here costs", async () => {
    configureTokenCounting({ ...DEFAULT_TOKEN_COUNTING, workers: 0 });
    const here = process.threadCpuUsage();
    const inline = await countPromptTokens(large);
    const spentHere = process.threadCpuUsage(here);
    configureTokenCounting({ ...DEFAULT_TOKEN_COUNTING, workers: 1 });
    await countPromptTokens({ ...large, messages: [{ role: "user", content: english(40_000) }] }); // the worker started
    const there = process.threadCpuUsage();
    const pooled = await countPromptTokens(large);
    const spentThere = process.threadCpuUsage(there);
    expect(pooled).toBe(inline);
    const cpu = (u: NodeJS.CpuUsage) => u.user + u.system;
    // CPU of this thread, not a clock: counting 400k characters here costs tens of milliseconds of it;
    // handing them to a worker costs a copy.
    expect(cpu(spentThere)).toBeLessThan(cpu(spentHere) / 4);
  });

  it("counts a small prompt here, as before", async () => {
    configureTokenCounting({ ...DEFAULT_TOKEN_COUNTING, workers: 1 });
    expect(
      await countPromptTokens({ model: "gpt-4o", messages: [{ role: "user", content: "hello there" }] }),
    ).toBe(9);
  });
});
