/**
 * `prompt_injection`: a built-in detector of the common families of attack,
 * read on the normalized text (so zero-width characters and look-alike
 * letters do not hide a phrase), and on what base64 runs decode to.
 * Expressions are over words joined by single spaces, with bounded gaps, so
 * each is linear in the text. Measured on the labelled set in
 * packages/core/test/fixtures/prompt-injection.jsonl.
 */
import { type Words, words } from "./normalize.ts";
import type { MatchOptions, Span } from "./span.ts";

export const INJECTION_FAMILIES = [
  "instruction_override",
  "role_play",
  "delimiter",
  "prompt_extraction",
  "encoding",
] as const;
export type InjectionFamily = (typeof INJECTION_FAMILIES)[number];

/** Up to `n` words in between: "(?:\\S+ ){0,n}". */
const gap = (n: number) => `(?:[a-z0-9]+ ){0,${n}}`;
const PREVIOUS =
  "(?:previous|prior|above|earlier|preceding|former|initial|original|system|all|any|your|the|these|those)";
const RULES =
  "(?:instructions?|prompts?|rules?|directions?|directives?|guidelines?|constraints?|context|programming|restrictions?|policies|policy|commands?|orders?)";

/** Phrases over the normalized words (lower case, single spaces, no punctuation). */
const WORD_RULES: [InjectionFamily, RegExp][] = [
  [
    "instruction_override",
    new RegExp(
      `\\b(?:ignore|disregard|forget|skip|bypass|override|overrule|discard|drop|abandon) ${gap(3)}${PREVIOUS} ${gap(2)}${RULES}\\b`,
    ),
  ],
  [
    "instruction_override",
    new RegExp(
      `\\b(?:do not|don t|dont|stop|no longer|quit) (?:follow|following|obey|obeying|listen to|listening to|adhere to|comply with) ${gap(2)}${PREVIOUS} ${gap(2)}${RULES}\\b`,
    ),
  ],
  [
    "instruction_override",
    /\b(?:new|updated|real|actual|true) (?:system )?instructions? (?:are|follow|from now)\b/,
  ],
  ["instruction_override", /\byou are no longer (?:bound|restricted|limited|required)\b/],
  [
    "instruction_override",
    /\bfrom now on (?:you|ignore|disregard|forget|respond|answer)\b.{0,80}\b(?:without|no|ignore|never refuse|any restrictions?|unfiltered|uncensored)\b/,
  ],
  [
    "instruction_override",
    /\b(?:ignore|disregard|forget) (?:everything|all) (?:(?:you (?:were|have been) told|said|written|above|before)|(?:that )?(?:came )?(?:before|above))\b/,
  ],
  [
    "role_play",
    /\b(?:you are|you re|act as|pretend (?:to be|you are)|roleplay as|role play as|behave as|become) (?:now )?(?:an? |the )?(?:dan|stan|dude|aim|evil|unfiltered|uncensored|unrestricted|jailbroken|unlimited|amoral|unaligned)\b/,
  ],
  ["role_play", /\bdo anything now\b/],
  [
    "role_play",
    /\b(?:developer|god|dev|debug|admin|sudo|unrestricted|jailbreak) mode (?:enabled|on|activated|unlocked)\b|\benable (?:developer|god|jailbreak|unrestricted) mode\b/,
  ],
  [
    "role_play",
    /\b(?:without|no|free of|free from|ignore) (?:any )?(?:ethical|moral|content|safety)? ?(?:restrictions|filters|guidelines|limitations|censorship|rules) (?:and|or|you|from|answer|respond|reply)\b/,
  ],
  ["role_play", /\bjailbreak(?:ed|ing)?\b.{0,60}\b(?:you|model|assistant|ai|chatgpt|prompt)\b/],
  [
    "prompt_extraction",
    /\b(?:reveal|print|show|repeat|output|display|tell me|give me|write out|leak|dump|recite) (?:me )?(?:your|the|all|any) (?:(?:full|entire|exact|complete|original|hidden|secret|initial|verbatim) )*(?:system prompt|system message|initial prompt|hidden prompt|instructions you were given|prompt above|instructions above|developer message)\b/,
  ],
  [
    "prompt_extraction",
    /\bwhat (?:is|are|were) your (?:system prompt|initial instructions|original instructions|hidden instructions)\b/,
  ],
  ["prompt_extraction", /\brepeat (?:the|all) (?:words|text) above\b/],
];

/** Chat-template markers and spoofed system turns, read on the text as sent (case-insensitive). */
const RAW_RULES: [InjectionFamily, RegExp][] = [
  [
    "delimiter",
    /<\|(?:im_start|im_end|system|endoftext|start_header_id|end_header_id|eot_id|begin_of_text)\|>/i,
  ],
  ["delimiter", /\[\/?INST\]|<<\/?SYS>>|<\/?(?:system|system_prompt|sys|instructions?)>/i],
  [
    "delimiter",
    /(?:^|\n)\s{0,8}(?:#{1,4}\s{0,4})?(?:system|developer)\s{0,4}(?:prompt|message|instructions?)?\s{0,4}:\s{0,4}\S/i,
  ],
  [
    "delimiter",
    /(?:^|\n)\s{0,8}(?:BEGIN|END)\s(?:SYSTEM|DEVELOPER|ADMIN)\s(?:PROMPT|MESSAGE|INSTRUCTIONS?)/i,
  ],
  ["delimiter", /```\s{0,4}system\b|\[system\]\s{0,4}\(#|\n\n(?:Human|Assistant):\s/],
];

/** ASCII characters of a base64 (or base64url) run: BASE64; its padding `=`: PAD; hex digits also HEX. */
const BASE64 = 1;
const PAD = 2;
const HEX = 4;
const ENCODED = new Uint8Array(128);
for (const ch of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
  ENCODED[ch.charCodeAt(0)] = BASE64;
for (const ch of "0123456789abcdefABCDEF") ENCODED[ch.charCodeAt(0)]! |= HEX;
ENCODED[0x3d] = PAD;

/** The ENCODED flags of the character at `i` (0 past the end and for non-ASCII). */
function flagsAt(text: string, i: number): number {
  const c = text.charCodeAt(i); // NaN past the end: `c < 0x80` is false
  return c < 0x80 ? ENCODED[c]! : 0;
}

/**
 * Where `text` holds a base64 run (a whole run of 24 or more of its
 * characters, with up to two `=` after and none of them right before or
 * after) and a hex run (a whole run of an even number of hex digits, at least
 * 32), each in order. One walk over the text: a hex run lies within a run of
 * base64 characters, so only those long enough are read again.
 */
export function encodedRuns(text: string): { base64: [number, number][]; hex: [number, number][] } {
  const base64: [number, number][] = [];
  const hex: [number, number][] = [];
  const n = text.length;
  for (let i = 0; i < n; ) {
    if ((flagsAt(text, i) & BASE64) === 0) {
      i++;
      continue;
    }
    const start = i;
    while (i < n && (flagsAt(text, i) & BASE64) !== 0) i++;
    if (i - start < 24) continue;
    let end = i;
    while (end < n && end - i < 2 && text.charCodeAt(end) === 0x3d) end++;
    if ((flagsAt(text, end) & (BASE64 | PAD)) === 0) base64.push([start, end]);
    if (i - start < 32) continue;
    for (let h = start; h < i; ) {
      if ((flagsAt(text, h) & HEX) === 0) {
        h++;
        continue;
      }
      const from = h;
      while (h < i && (flagsAt(text, h) & HEX) !== 0) h++;
      if (h - from >= 32 && (h - from) % 2 === 0) hex.push([from, h]);
    }
  }
  return { base64, hex };
}

/** Encoded runs decoded per text; more are left alone (each decode costs a scan). */
const MAX_DECODED_RUNS = 64;
const MAX_RUN_CHARS = 16_384;

export interface InjectionHit {
  family: InjectionFamily;
  span: Span;
}

function normalizedLine(
  text: string,
  w: Words = words(text),
): { line: string; starts: number[]; ends: number[]; offsets: number[] } {
  const offsets: number[] = [];
  let at = 0;
  for (const word of w.words) {
    offsets.push(at);
    at += word.length + 1;
  }
  return { line: w.words.join(" "), starts: w.starts, ends: w.ends, offsets };
}

/** The word whose normalized offset contains `pos` (binary search). */
function wordAt(offsets: number[], pos: number): number {
  let lo = 0;
  let hi = offsets.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (offsets[mid]! <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

function detectPlain(text: string, hits: InjectionHit[], spanOf?: Span, textWords?: Words): void {
  const { line, starts, ends, offsets } = normalizedLine(text, textWords);
  for (const [family, re] of WORD_RULES) {
    const m = re.exec(line);
    if (!m) continue;
    const a = wordAt(offsets, m.index);
    const b = wordAt(offsets, Math.max(m.index, m.index + m[0].length - 1));
    hits.push({ family, span: spanOf ?? { start: starts[a]!, end: ends[b]!, kind: "prompt_injection" } });
  }
  for (const [family, re] of RAW_RULES) {
    const m = re.exec(text);
    if (m)
      hits.push({
        family,
        span: spanOf ?? { start: m.index, end: m.index + m[0].length, kind: "prompt_injection" },
      });
  }
}

function decodeRun(run: string, encoding: "base64" | "hex"): string | undefined {
  const decoded = Buffer.from(
    run,
    encoding === "base64" ? (run.includes("-") || run.includes("_") ? "base64url" : "base64") : "hex",
  ).toString("utf8");
  // Only text is worth reading: most of the decoded characters printable.
  let printable = 0;
  for (let i = 0; i < decoded.length; i++) {
    const c = decoded.charCodeAt(i);
    if ((c >= 0x20 && c < 0x7f) || c === 0x0a || c === 0x0d || c === 0x09 || c > 0xa0) printable++;
  }
  return decoded.length >= 12 && printable / decoded.length > 0.9 && /[a-zA-Z]{3,} [a-zA-Z]{2,}/.test(decoded)
    ? decoded
    : undefined;
}

/**
 * Attacks found in `text`, each with its family and where it lies; empty
 * when none. `textWords` are `words(text)` when the caller has them already.
 */
export function detectPromptInjection(
  text: string,
  options: MatchOptions = {},
  textWords?: Words,
): InjectionHit[] {
  const hits: InjectionHit[] = [];
  detectPlain(text, hits, undefined, textWords);
  let decodedRuns = 0;
  const runs = encodedRuns(text);
  for (const encoding of ["base64", "hex"] as const) {
    for (const [start, end] of runs[encoding]) {
      if (decodedRuns >= MAX_DECODED_RUNS) break;
      if (end - start > MAX_RUN_CHARS || (options.partial && end === text.length)) continue;
      const decoded = decodeRun(text.slice(start, end), encoding);
      if (decoded === undefined) continue;
      decodedRuns++;
      const span: Span = { start, end, kind: "prompt_injection" };
      const inner: InjectionHit[] = [];
      detectPlain(decoded, inner, span);
      if (inner.length > 0) hits.push({ family: "encoding", span });
    }
  }
  if (options.partial) return hits.filter((h) => h.span.end < text.length);
  return hits;
}
