import { decode, encode } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { BYTES_PER_TOKEN, capWholeOutput, OutputCap } from "./output-cap.ts";

const TEXT = "The quick brown fox jumps over the lazy dog, 漢字かな交じり文 and 3.14159 digits. ".repeat(20);

/** `text` as a provider streams it: one token an event. */
const tokenPieces = (text: string) => encode(text).map((t) => decode([t]));

async function takeAll(cap: OutputCap, pieces: string[]) {
  let kept = "";
  for (const piece of pieces) {
    kept += await cap.take(piece);
    if (cap.cut) break;
  }
  return kept;
}

describe("the output cap", () => {
  it("never cuts a provider that stops at the cap by its own count: a known family streaming token by token", async () => {
    const pieces = tokenPieces(TEXT).slice(0, 200);
    const cap = new OutputCap("gpt-4o-mini", 200);
    expect(await takeAll(cap, pieces)).toBe(pieces.join(""));
    expect(cap.cut).toBe(false);
  });

  it("never cuts one of an unknown family that streams a token or more an event, whatever its tokens' lengths", async () => {
    // Up to 16 bytes a token: " extraordinarily" is one token of many encodings.
    const pieces = Array.from({ length: 50 }, (_, i) => (i % 2 ? " extraordinarily" : "漢字"));
    const cap = new OutputCap("llama-3.1-70b", 50);
    expect(await takeAll(cap, pieces)).toBe(pieces.join(""));
    expect(cap.cut).toBe(false);
  });

  it("cuts a known family at the cap, exactly by its encoding, and says by how much it went past", async () => {
    const pieces = tokenPieces(TEXT);
    const cap = new OutputCap("gpt-4o", 100);
    const kept = await takeAll(cap, pieces);
    expect(encode(kept)).toHaveLength(100);
    expect(cap.cut).toBe(true);
    expect(cap.overrun).toBeGreaterThan(0);
    expect(await cap.take("more")).toBe("");
  });

  it("cuts an answer sent in one large piece within the cap: by the encoding, or by bytes for an unknown family", async () => {
    const known = new OutputCap("gpt-4o", 100);
    const kept = await known.take(TEXT);
    expect(encode(kept).length).toBeLessThanOrEqual(100);
    expect(encode(kept).length).toBeGreaterThan(80);
    expect(TEXT.startsWith(kept)).toBe(true);
    const unknown = new OutputCap("llama-3.1-70b", 100);
    const bytes = Buffer.byteLength(await unknown.take(TEXT));
    expect(bytes).toBeLessThanOrEqual(100 * BYTES_PER_TOKEN);
    expect(bytes).toBeGreaterThan(100 * BYTES_PER_TOKEN - 4);
    expect(unknown.cut).toBe(true);
  });

  it("keeps a JSON answer the provider says is within the cap as it is, and cuts one it says is past it, keeping only whole tool calls", async () => {
    const call = { id: "call_1", name: "f", arguments: '{"text":"hello"}' };
    const within = { text: TEXT, toolCalls: [call], reported: 64, reasoning: 0 };
    expect(await capWholeOutput("llama-3.1-70b", 64, within)).toEqual({
      text: TEXT,
      toolCalls: [call],
      overrun: 0,
    });
    const past = await capWholeOutput("gpt-4o", 64, { ...within, reported: 5_000 });
    expect(past.overrun).toBe(5_000 - 64);
    expect(past.toolCalls).toEqual([]);
    expect(encode(past.text).length).toBeLessThanOrEqual(64);
    expect(TEXT.startsWith(past.text)).toBe(true);
  });
});
