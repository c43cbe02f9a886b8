/**
 * `ban_words`: every entry in one pass over the text's words (a trie of
 * words, so ten thousand entries cost what one does), then each RE2 pattern.
 */
import { RE2JS } from "re2js";
import type { Check } from "./checks.ts";
import { type Words, words as wordsOf } from "./normalize.ts";
import type { MatchOptions, Span } from "./span.ts";

interface TrieNode {
  next?: Map<string, TrieNode>;
  /** An entry ends at this word. */
  end?: boolean;
}

export interface CompiledBanWords {
  root: Map<string, TrieNode>;
  patterns: RE2JS[];
  leetspeak: boolean;
  /** Characters of the longest entry after normalization, for a stream's hold-back. */
  longest: number;
}

export function compileBanWords(check: Extract<Check, { type: "ban_words" }>): CompiledBanWords {
  const root = new Map<string, TrieNode>();
  let longest = 0;
  for (const entry of check.words) {
    const ws = wordsOf(entry, check.leetspeak).words;
    if (ws.length === 0) continue;
    longest = Math.max(longest, ws.join(" ").length);
    let level = root;
    let node: TrieNode | undefined;
    for (const w of ws) {
      node = level.get(w);
      if (!node) {
        node = {};
        level.set(w, node);
      }
      level = node.next ??= new Map();
    }
    node!.end = true;
  }
  return { root, patterns: check.patterns.map((p) => RE2JS.compile(p)), leetspeak: check.leetspeak, longest };
}

/**
 * The spans of `text` the check bans (longest entry at each word).
 * `textWords` are `text`'s words as `words(text, c.leetspeak)` cuts them,
 * when the caller has them already.
 */
export function matchBanWords(
  c: CompiledBanWords,
  text: string,
  options: MatchOptions = {},
  textWords?: Words,
): Span[] {
  const spans: Span[] = [];
  if (c.root.size > 0) {
    const { words, starts, ends } = textWords ?? wordsOf(text, c.leetspeak);
    const n = words.length;
    for (let i = 0; i < n; i++) {
      let node = c.root.get(words[i]!);
      let matchedTo = -1;
      for (let j = i; node; ) {
        if (node.end) matchedTo = j;
        if (++j >= n || !node.next) break;
        node = node.next.get(words[j]!);
      }
      if (matchedTo < 0) continue;
      // A match whose last word touches the end of a partial text may still grow into another word.
      if (options.partial && ends[matchedTo] === text.length) continue;
      spans.push({ start: starts[i]!, end: ends[matchedTo]!, kind: "ban_words" });
      i = matchedTo;
    }
  }
  for (const p of c.patterns) {
    const m = p.matcher(text);
    while (m.find()) {
      const start = m.start();
      const end = m.end();
      if (options.partial && end === text.length) continue;
      if (end > start) spans.push({ start, end, kind: "ban_words" });
    }
  }
  return spans;
}
