/**
 * The text as the word checks see it: NFKC, case-folded, accents dropped,
 * characters that render as nothing removed, and common look-alikes mapped
 * to the Latin letter they imitate; then cut into words. Every word keeps the
 * offsets of the original text it came from, so a match can be redacted in
 * the text as sent.
 */

/** Characters that render as nothing (or nearly) and so can hide inside a word. */
const IGNORABLE = new Set([
  0x00ad, 0x034f, 0x061c, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180b, 0x180c, 0x180d, 0x180e, 0x200b, 0x200c,
  0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064,
  0x2066, 0x2067, 0x2068, 0x2069, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0x3164, 0xfe00, 0xfe0f,
  0xfeff, 0xffa0,
]);

/** Is `cp` a character that renders as nothing (zero-width, joiners, direction marks, variation selectors, tags)? */
export function isIgnorable(cp: number): boolean {
  return IGNORABLE.has(cp) || (cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0000 && cp <= 0xe007f);
}

/**
 * Cyrillic and Greek letters (lower case: folding comes first) that look like
 * a Latin letter. Full-width and mathematical letters need no entry: NFKC
 * maps them already.
 */
const HOMOGLYPHS: Record<string, string> = {
  а: "a",
  в: "b",
  е: "e",
  ё: "e",
  к: "k",
  м: "m",
  н: "h",
  о: "o",
  р: "p",
  с: "c",
  т: "t",
  у: "y",
  х: "x",
  і: "i",
  ї: "i",
  ј: "j",
  ѕ: "s",
  ԁ: "d",
  һ: "h",
  ӏ: "l",
  ԛ: "q",
  ԝ: "w",
  ɡ: "g",
  ɑ: "a",
  ı: "i",
  α: "a",
  β: "b",
  ε: "e",
  η: "n",
  ι: "i",
  κ: "k",
  ν: "v",
  ο: "o",
  ρ: "p",
  τ: "t",
  υ: "u",
  χ: "x",
  γ: "y",
  ϲ: "c",
  ϳ: "j",
  ѵ: "v",
  ʏ: "y",
  ℓ: "l",
};

/** Digits and signs written for letters ("h4ck", "$ecret"), mapped only when a policy asks (`leetspeak`). */
const LEET: Record<string, string> = {
  "0": "o",
  "1": "i",
  "3": "e",
  "4": "a",
  "5": "s",
  "7": "t",
  "@": "a",
  $: "s",
};

const COMBINING_MARK = /\p{M}/u;
const WORD_CHAR = /[\p{L}\p{N}]/u;
/** Scripts written without spaces between words: each character is a word of its own. */
const UNSPACED =
  /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}]/u;

const FOLDED = new Map<number, string>();

/** One code point folded: NFKD, accents dropped, lower case, look-alikes mapped; "" for an ignorable one. */
function fold(cp: number): string {
  let out = FOLDED.get(cp);
  if (out !== undefined) return out;
  if (isIgnorable(cp)) out = "";
  else {
    out = "";
    for (const ch of String.fromCodePoint(cp).normalize("NFKD").toLowerCase()) {
      if (COMBINING_MARK.test(ch)) continue;
      out += HOMOGLYPHS[ch] ?? ch;
    }
    out = out.normalize("NFKC");
  }
  if (FOLDED.size < 65_536) FOLDED.set(cp, out);
  return out;
}

const Kind = { Separator: 0, Word: 1, Unspaced: 2 } as const;
type Kind = (typeof Kind)[keyof typeof Kind];
const KIND = new Map<string, Kind>();
function kindOf(ch: string): Kind {
  const code = ch.charCodeAt(0);
  if (code < 0x80) {
    return (code >= 0x61 && code <= 0x7a) || (code >= 0x30 && code <= 0x39) ? Kind.Word : Kind.Separator;
  }
  let k = KIND.get(ch);
  if (k === undefined) {
    k = UNSPACED.test(ch) ? Kind.Unspaced : WORD_CHAR.test(ch) ? Kind.Word : Kind.Separator;
    if (KIND.size < 65_536) KIND.set(ch, k);
  }
  return k;
}

/** ASCII characters by what they are to a word: lower-case letters and digits, upper-case letters, the rest. */
const SEPARATOR = 0;
const LOWER = 1;
const UPPER = 2;
const ASCII_CLASS = new Uint8Array(128);
for (let c = 0x30; c <= 0x39; c++) ASCII_CLASS[c] = LOWER;
for (let c = 0x61; c <= 0x7a; c++) ASCII_CLASS[c] = LOWER;
for (let c = 0x41; c <= 0x5a; c++) ASCII_CLASS[c] = UPPER;

/** Words of a text in order, each with where it lies in the original text (UTF-16 offsets, end exclusive). */
export interface Words {
  words: string[];
  starts: number[];
  ends: number[];
}

/**
 * The words of `text` after normalization. A word is a run of letters and
 * digits (any script); an ignorable character inside one does not end it,
 * and every other character separates words.
 */
export function words(text: string, leetspeak = false): Words {
  const out: Words = { words: [], starts: [], ends: [] };
  let current = "";
  let start = -1;
  let end = -1;
  const flush = () => {
    if (current) {
      out.words.push(current);
      out.starts.push(start);
      out.ends.push(end);
      current = "";
    }
  };
  const n = text.length;
  for (let i = 0; i < n; ) {
    const code = text.charCodeAt(i);
    if (!leetspeak && code < 0x80) {
      const cls = ASCII_CLASS[code]!;
      if (cls === SEPARATOR) {
        if (current) flush();
        i++;
        continue;
      }
      if (!current) {
        // A run of ASCII letters and digits is a word as it stands (lower-cased), unless a
        // non-ASCII character follows it and may continue it: then the run goes the slow way.
        let upper = cls === UPPER;
        let j = i + 1;
        let next = 0;
        for (; j < n; j++) {
          next = text.charCodeAt(j);
          if (next >= 0x80 || ASCII_CLASS[next] === SEPARATOR) break;
          if (ASCII_CLASS[next] === UPPER) upper = true;
        }
        if (j === n || next < 0x80) {
          const word = text.slice(i, j);
          out.words.push(upper ? word.toLowerCase() : word);
          out.starts.push(i);
          out.ends.push(j);
          i = j;
          continue;
        }
      }
    }
    let folded: string;
    let width = 1;
    if (code < 0x80) {
      // ASCII: no table lookups on the common path.
      folded = code >= 0x41 && code <= 0x5a ? String.fromCharCode(code + 32) : text[i]!;
    } else {
      const cp = text.codePointAt(i)!;
      width = cp > 0xffff ? 2 : 1;
      folded = fold(cp);
      if (folded === "") {
        i += width;
        continue;
      }
    }
    for (let c of folded) {
      if (leetspeak) c = LEET[c] ?? c;
      const kind = kindOf(c);
      if (kind === Kind.Word) {
        if (!current) start = i;
        current += c;
        end = i + width;
      } else {
        flush();
        if (kind === Kind.Unspaced) {
          out.words.push(c);
          out.starts.push(i);
          out.ends.push(i + width);
        }
      }
    }
    i += width;
  }
  flush();
  return out;
}

/** Counts the characters of `text` that are not ignorable (a hold-back window is measured in these). */
export function visibleLength(text: string, from = 0, to = text.length): number {
  let count = 0;
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xdc00 && code <= 0xdfff) continue; // the second half of a pair counted with the first
    if (code < 0x80 || !isIgnorable(text.codePointAt(i)!)) count++;
  }
  return count;
}
