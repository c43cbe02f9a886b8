import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it, onTestFinished } from "vitest";
import { useStack } from "../../test/stack.ts";
import {
  configureTokenCounting,
  countPromptTokens,
  countTokens,
  DEFAULT_TOKEN_COUNTING,
  MAX_ENCODED_PIECE_CHARS,
} from "./tokens.ts";

/**
 * Counting tokens never holds the event loop: byte-pair encoding is
 * quadratic in a piece's length, so pieces past a bound count as their UTF-8
 * bytes (an upper bound), and the counting yields between slices. Exact for
 * ordinary text.
 */
const AS_TEXT = { disallowedSpecial: new Set<string>() };
const whole = { "gpt-4o": (t: string) => o200k(t, AS_TEXT), "gpt-4": (t: string) => cl100k(t, AS_TEXT) };
const cjk = (n: number) =>
  Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join("");

describe("the bounded count", () => {
  const ordinary = [
    "Hello, world! It's 12:45 o'clock; 3.14159 and 1,000,000 apples.\n\n  Indented\ttext\r\nwith CRLF.",
    "这是一个中文句子，包含标点符号。第二句话也在这里！日本語の文章も、ここにあります。",
    'function f(x) {\n  return x * 2; // doubles\n}\n{"type": "object", "properties": {"a": {"type": "string"}}}',
    "Ünïcödé façade — naïve café; Ελληνικά κείμενα και русский текст, עברית ועربية.",
    "emoji 😀👍🏽 flags 🇫🇷 and <|endoftext|> as text, <|im_start|> too",
    `${"word ".repeat(3_000)}${"\n".repeat(40)}${" ".repeat(200)}x`,
  ];

  it.each(Object.keys(whole) as (keyof typeof whole)[])(
    "is the tokenizer's own count for ordinary text (%s)",
    async (model) => {
      for (const text of ordinary) expect(await countTokens(model, text)).toBe(whole[model](text));
    },
  );

  it.each(Object.keys(whole) as (keyof typeof whole)[])(
    "is an upper bound for pieces past the bound, which count as their UTF-8 bytes (%s)",
    async (model) => {
      for (const text of [
        cjk(2_000),
        "😀".repeat(1_000),
        " ".repeat(4_000),
        "ꙮ".repeat(2_000),
        "7".repeat(3_000),
      ]) {
        const bounded = await countTokens(model, text);
        expect(bounded).toBeGreaterThanOrEqual(whole[model](text));
        expect(bounded).toBeLessThanOrEqual(Buffer.byteLength(text));
      }
      // Just within the bound a piece is still encoded exactly.
      const piece = cjk(MAX_ENCODED_PIECE_CHARS);
      expect(await countTokens(model, piece)).toBe(whole[model](piece));
    },
  );

  it("yields to the event loop while it counts a large text on it (no worker threads)", async () => {
    configureTokenCounting({ ...DEFAULT_TOKEN_COUNTING, workers: 0 });
    onTestFinished(() => configureTokenCounting(DEFAULT_TOKEN_COUNTING));
    let turns = 0;
    let counting = true;
    const tick = () => {
      if (!counting) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    await countPromptTokens({
      model: "gpt-4",
      messages: [{ role: "user", content: "a\u0301".repeat(100_000) }],
    });
    counting = false;
    // 200k characters in slices of 8k: other work ran between the slices (a synchronous count gives 0).
    expect(turns).toBeGreaterThanOrEqual(10);
  });
});

describe("through the service", () => {
  // The bound is what is tested, not the deadline: a loaded machine counts the costliest input slower than 10 s.
  const stack = useStack({ TOKEN_COUNT_TIMEOUT_MS: "60000" });
  const COUNT = "/api/v1/llm/responses/input_tokens";

  it("answers another key's requests while it counts the costliest input for the bound", async () => {
    const [big, other] = [await stack.createKey(), await stack.createKey()];
    // Decomposed accents: the most work per byte for the bounded count (about 0.6 s a MiB here), ~900 KB.
    const text = "a\u0301".repeat(300_000);
    let finished = false;
    const counted = stack
      .call(big.secret, COUNT, { json: { model: "gpt-4", input: text } })
      .then(async (res) => {
        finished = true;
        return { status: res.status, body: await res.json() };
      });
    let answeredBefore = 0;
    while (!finished) {
      const res = await stack.call(other.secret, "/api/v1/llm/models");
      expect(res.status).toBe(200);
      await res.body?.cancel();
      if (!finished) answeredBefore++;
    }
    const { status, body } = await counted;
    expect(status).toBe(200);
    expect(body.input_tokens).toBe(whole["gpt-4"](text) + 7);
    // Relative, not a clock: the other key's requests went through while the big one was counted
    // (a count that held the event loop would let none through before it finished).
    expect(answeredBefore).toBeGreaterThanOrEqual(3);
  });

  it("counts special tokens written in a text as text (it was a 500)", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, COUNT, {
      json: { model: "gpt-4o", input: "say <|endoftext|> and <|im_start|>" },
    });
    expect(res.status).toBe(200);
    expect((await res.json()).input_tokens).toBe(whole["gpt-4o"]("say <|endoftext|> and <|im_start|>") + 7);
  });

  it.each([
    ["100,000 CJK characters", "gpt-4o", cjk(100_000)],
    ["a 1 MB body of one repeated rare character", "gpt-4o", "ꙮ".repeat(340_000)],
    ["64,000 spaces", "gpt-4", `x${" ".repeat(64_000)}x`],
    ["200,000 emoji", "gpt-4o", "😀".repeat(200_000)],
  ])("counts %s promptly, as an upper bound", async (_what, model, text) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, COUNT, { json: { model, input: text } });
    expect(res.status).toBe(200);
    const { input_tokens } = await res.json();
    // The long piece counts as its UTF-8 bytes (plus the message's framing), never less than the tokenizer's count.
    expect(input_tokens).toBeGreaterThan(text.length / 4);
    expect(input_tokens).toBeLessThanOrEqual(Buffer.byteLength(text) + 7);
  });
});
