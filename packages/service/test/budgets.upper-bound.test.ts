import { randomBytes } from "node:crypto";
import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

/**
 * A reservation is an upper bound of what the provider will report, whatever
 * the text (CJK, rare characters, digits) and whatever the request carries
 * (a `text.format` JSON schema): concurrent calls at the edge of a token
 * window, all admitted before any is answered, never charge past its limit.
 * The fake provider reports tokens as a real tokenizer would.
 */
const stack = useStack({ LLM_TIMEOUT_MS: "30000" });
const LIMIT = 20_000;
const LIMITS: Limits = { tokens: { minute: LIMIT } };

afterEach(() => {
  stack.llm.countTokens = undefined;
  stack.llm.release();
});

/** Sends `bodies` at once while the provider holds every answer, then lets them all through. */
async function atOnce(secret: string, bodies: Record<string, unknown>[], marker: string) {
  stack.llm.mode = "hold";
  let refused = 0;
  const answers = bodies.map((json) =>
    stack.call(secret, "/api/v1/llm/responses", { json, user: "alice" }).then(async (res) => {
      if (res.status === 429) refused++;
      return { status: res.status, body: await res.json() };
    }),
  );
  const reached = () => stack.llm.requests.filter((r) => JSON.stringify(r.body).includes(marker)).length;
  // Every call is decided (held at the provider, or refused) before any is answered.
  await vi.waitFor(() => expect(reached() + refused).toBe(bodies.length), { timeout: 20_000 });
  stack.llm.release();
  return Promise.all(answers);
}

const used = async (keyId: string) =>
  (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS))[0]!.used;

describe("reservations hold for every text", () => {
  it.each([
    ["CJK", "漢字仮名交じり文を含む長い段落".repeat(70)],
    ["rare characters", "ꙮ𓀀𒀀".repeat(250)],
    ["digits", "31415926535897932384".repeat(90)],
  ])(
    "20 concurrent calls in %s to a model without a known tokenizer never charge past the window",
    async (_kind, text) => {
      // The most any byte-level tokenizer can report: one token per UTF-8 byte.
      stack.llm.countTokens = (t) => Buffer.byteLength(t);
      const key = await stack.createKey({ limits: LIMITS });
      const marker = randomBytes(6).toString("hex");
      const answers = await atOnce(
        key.secret,
        Array.from({ length: 20 }, (_, i) => ({
          model: "llama-3.1-70b",
          input: `${marker}${i} ${text}`,
          max_output_tokens: 16,
        })),
        marker,
      );
      const served = answers.filter((a) => a.status === 200);
      expect(served.length).toBeGreaterThan(0);
      expect(answers.filter((a) => a.status === 429).length).toBeGreaterThan(0);
      const charged = served.reduce((n, a) => n + a.body.usage.total_tokens, 0);
      expect(await used(key.id)).toBe(charged); // reconciled to the provider's figures
      expect(charged).toBeLessThanOrEqual(LIMIT);
    },
  );

  it("counts a text.format JSON schema: 10 concurrent calls carrying a large one never charge past the window", async () => {
    stack.llm.countTokens = (t) => o200k(t, { disallowedSpecial: new Set() });
    const key = await stack.createKey({ limits: LIMITS });
    const marker = randomBytes(6).toString("hex");
    const properties = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [
        `field_${i}_${marker}`,
        {
          type: "string",
          description: `The ${i}th field of the answer, described at some length for the model.`,
        },
      ]),
    );
    const format = { type: "json_schema", name: "answer", schema: { type: "object", properties } };
    const answers = await atOnce(
      key.secret,
      Array.from({ length: 10 }, () => ({
        model: "gpt-4o-mini",
        input: "hi",
        max_output_tokens: 16,
        text: { format },
      })),
      marker,
    );
    const served = answers.filter((a) => a.status === 200);
    expect(served.length).toBeGreaterThan(0);
    expect(served.length).toBeLessThan(10);
    const charged = served.reduce((n, a) => n + a.body.usage.total_tokens, 0);
    expect(await used(key.id)).toBe(charged);
    expect(charged).toBeLessThanOrEqual(LIMIT);
  });
});
