import type { ToolCall, Usage } from "./chat.ts";
import { countTokens, type Tokenizer, tokenizerOf } from "./tokens.ts";

/**
 * A model's output held to the call's output cap (`maxOutputTokens`: the
 * caller's `max_output_tokens`, or what a budget reserved for the output),
 * for a provider that ignores the `max_tokens` it was sent: the answer ends
 * at the cap as truncated (`finishReason: "length"`), its usage counts at
 * most the cap, and what the provider produced past it is its `overrun`
 * (docs/api/rate-limits.md, "Token and spend budgets").
 *
 * The count must never cut an honest provider short (it stops at the cap
 * by its own count), so it is one that provider never exceeds:
 * - a model of a known family: its own encoding's count of each piece
 *   (`llm/tokens.ts`; a provider streams whole tokens, so the sum is its count);
 * - other models: one token for each piece the provider sent (providers
 *   stream one or more tokens an event, never less), or one for every
 *   `BYTES_PER_TOKEN` bytes of a longer piece, so that a provider sending
 *   its answer in a few large pieces is cut too.
 * While the output's UTF-8 bytes are within the cap its tokens are too (no
 * byte-level encoding has more tokens than bytes): nothing is counted then.
 */
export class OutputCap {
  readonly cap: number | undefined;
  private readonly model: string;
  private readonly tokenizer: Tokenizer;
  private bytes = 0;
  private tokens = 0;
  /** Pieces taken while the bytes were within the cap, counted only once they are not. */
  private uncounted: string[] | undefined = [];
  /** Tokens past the cap in what was taken (0 while the output is within it). */
  overrun = 0;

  constructor(model: string, cap: number | undefined) {
    this.model = model;
    this.cap = cap;
    this.tokenizer = tokenizerOf(model);
  }

  /** Whether the output went past the cap: nothing more is taken, and the provider need not be read further. */
  get cut(): boolean {
    return this.overrun > 0;
  }

  /** The part of `piece` within the cap: all of it, the share that fits once the cap is reached, then nothing. */
  async take(piece: string): Promise<string> {
    if (this.cap === undefined || piece === "") return piece;
    if (this.cut) return "";
    this.bytes += Buffer.byteLength(piece);
    if (this.uncounted) {
      if (this.bytes <= this.cap) {
        this.uncounted.push(piece);
        return piece;
      }
      for (const earlier of this.uncounted) this.tokens += await this.count(earlier);
      this.uncounted = undefined;
    }
    const tokens = await this.count(piece);
    const room = this.cap - this.tokens;
    if (tokens <= room) {
      this.tokens += tokens;
      return piece;
    }
    this.overrun = tokens - room;
    this.tokens = this.cap;
    return this.fit(piece, room, tokens);
  }

  /** The longest start of `piece` (of `tokens`) found within `room` tokens, by the same count. */
  private async fit(piece: string, room: number, tokens: number): Promise<string> {
    if (room <= 0) return "";
    if (this.tokenizer === "utf8_bytes") return prefixOfBytes(piece, room * BYTES_PER_TOKEN);
    // Tokens are not spread evenly over a text: a share by length comes close, and a few more shares get under.
    let kept = piece;
    let counted = tokens;
    for (let tries = 0; tries < 4; tries++) {
      kept = prefixOf(kept, Math.floor((kept.length * room) / counted));
      counted = await this.count(kept);
      if (counted <= room) return kept;
    }
    return prefixOfBytes(piece, room); // no byte-level encoding has more tokens than bytes
  }

  private count(piece: string): Promise<number> {
    if (this.tokenizer !== "utf8_bytes") return countTokens(this.model, piece);
    return Promise.resolve(Math.max(1, Math.ceil(Buffer.byteLength(piece) / BYTES_PER_TOKEN)));
  }
}

/** A token longer than this many UTF-8 bytes is rare in any encoding (a long run of one character, such as indentation, aside). */
export const BYTES_PER_TOKEN = 16;

/** The start of a text of at most `bytes` UTF-8 bytes, not splitting a character. */
function prefixOfBytes(text: string, bytes: number): string {
  const encoded = Buffer.from(text, "utf8");
  if (encoded.length <= bytes) return text;
  let end = Math.max(0, bytes);
  while (end > 0 && (encoded[end]! & 0xc0) === 0x80) end--; // back to the start of a character
  return encoded.subarray(0, end).toString("utf8");
}

/** The first `chars` UTF-16 units of a text (all of it if shorter), not splitting a surrogate pair. */
function prefixOf(text: string, chars: number): string {
  let end = Math.max(0, Math.min(chars, text.length));
  const last = text.charCodeAt(end - 1);
  if (end > 0 && end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
  return text.slice(0, end);
}

/** An answer's output as the provider gave it in one piece (a JSON answer). */
export interface WholeOutput {
  text: string;
  toolCalls: ToolCall[];
  /** Output tokens the provider reported (reasoning included), if it did. */
  reported: number | undefined;
  /** Reasoning tokens among them (never shown, so not in the text). */
  reasoning: number;
}

/**
 * A JSON answer held to `cap`: unchanged when the provider reports (or,
 * reporting nothing, is counted at) at most the cap; else the share of its
 * text and tool calls that the cap covers of what it reported (by its own
 * count), a tool call kept only whole (a cut call's arguments are no call),
 * with the tokens past the cap as `overrun`.
 */
export async function capWholeOutput(
  model: string,
  cap: number | undefined,
  output: WholeOutput,
): Promise<{ text: string; toolCalls: ToolCall[]; overrun: number }> {
  const { reported } = output;
  let { text, toolCalls } = output;
  if (cap === undefined || (reported !== undefined && reported <= cap))
    return { text, toolCalls, overrun: 0 };
  if (reported !== undefined) {
    // The provider's own count of this very output says how much of it the cap covers.
    const visible = reported - output.reasoning;
    const share = visible > 0 ? Math.max(0, cap - output.reasoning) / visible : 0;
    let room = Math.floor((text.length + toolCalls.reduce((n, c) => n + c.arguments.length, 0)) * share);
    text = prefixOf(text, room);
    room -= text.length;
    const whole: ToolCall[] = [];
    for (const call of toolCalls) {
      if (call.arguments.length > room) break;
      whole.push(call);
      room -= call.arguments.length;
    }
    toolCalls = whole;
  }
  // And within the cap by the service's count as well (see `OutputCap`).
  const held = new OutputCap(model, cap);
  const kept = { text: await held.take(text), toolCalls: [] as ToolCall[] };
  for (const call of toolCalls) {
    const args = await held.take(call.arguments);
    if (held.cut) break;
    kept.toolCalls.push({ ...call, arguments: args });
  }
  return { ...kept, overrun: reported !== undefined ? reported - cap : held.overrun };
}

/** Usage never counts more output than the cap, and a cut answer counts the cap (the provider produced at least that). */
export function cappedUsage(usage: Usage, cap: number | undefined, cut: boolean): Usage {
  if (cap === undefined) return usage;
  const output = cut ? cap : Math.min(usage.output_tokens, cap);
  return {
    input_tokens: usage.input_tokens,
    output_tokens: output,
    total_tokens: usage.input_tokens + output,
  };
}
