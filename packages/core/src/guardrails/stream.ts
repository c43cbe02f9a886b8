/**
 * Holding back the end of a streamed answer: text is released only once the
 * checks have seen what follows it, so a banned word split across chunks is
 * caught before any part of it reaches the client.
 */
import { isIgnorable } from "./normalize.ts";

/**
 * Takes text deltas and says how much may be released. The last `window`
 * visible characters stay held (ignorable ones such as zero-width spaces
 * count for nothing, so padding a word with them does not push it out of
 * the window), and so does a word still being written at the end.
 *
 * Use: `push(delta)`, run `evaluate(policies, hold.text, {…, partial: true})`;
 * if nothing blocks, send `hold.release()`; at the end of the stream
 * evaluate the whole text without `partial` and send `hold.release(true)`.
 */
export class StreamHoldback {
  private buffer = "";
  private released = 0;

  readonly window: number;

  constructor(window: number) {
    this.window = window;
    if (!Number.isInteger(window) || window < 0)
      throw new RangeError("window must be a non-negative integer");
  }

  /** Everything received so far. */
  get text(): string {
    return this.buffer;
  }

  /** Characters (UTF-16 units) already released. */
  get releasedLength(): number {
    return this.released;
  }

  push(delta: string): void {
    this.buffer += delta;
  }

  /** The offset up to which the text may be released now (never decreasing). */
  releasable(): number {
    let at = this.buffer.length;
    let visible = 0;
    // Walk back over `window` visible characters.
    while (at > this.released && visible < this.window) {
      at--;
      const code = this.buffer.charCodeAt(at);
      if (code >= 0xdc00 && code <= 0xdfff && at > 0) at--;
      if (!isIgnorable(this.buffer.codePointAt(at)!)) visible++;
    }
    if (visible < this.window) return this.released;
    // Then back to the start of the word that straddles that point.
    while (at > this.released && isWordish(this.buffer, at - 1)) at--;
    // Never split a surrogate pair.
    const code = this.buffer.charCodeAt(at);
    if (at > this.released && code >= 0xdc00 && code <= 0xdfff) at--;
    return Math.max(at, this.released);
  }

  /** The text newly released (everything left when `final`); marks it released. */
  release(final = false): string {
    const to = final ? this.buffer.length : this.releasable();
    const out = this.buffer.slice(this.released, to);
    this.released = to;
    return out;
  }
}

function isWordish(text: string, i: number): boolean {
  const code = text.charCodeAt(i);
  if (code < 0x80)
    return (code | 0x20) >= 0x61 && (code | 0x20) <= 0x7a ? true : code >= 0x30 && code <= 0x39;
  // Any non-ASCII character may be a letter, a look-alike or an ignorable: keep it with its word.
  return true;
}
