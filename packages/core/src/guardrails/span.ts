/** Where a check found something in the text as sent: UTF-16 offsets (end exclusive) and a kind for the placeholder. */
export interface Span {
  start: number;
  end: number;
  /** The placeholder's type: `email`, `openai_key`, `ban_words`, …; never the matched text. */
  kind: string;
}

/** Options every check's matcher takes. */
export interface MatchOptions {
  /**
   * The text is a prefix of more to come (a stream so far): a match that
   * reaches its end is left for later, since the next characters may change
   * it ("bad" may become "badge").
   */
  partial?: boolean;
}

/** Spans in order of start, overlapping ones merged (the first one's kind kept). */
export function mergeSpans(spans: readonly Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => a.start - b.start || b.end - a.end);
  const out: Span[] = [];
  for (const s of sorted) {
    const last = out.at(-1);
    if (last && s.start < last.end) last.end = Math.max(last.end, s.end);
    else out.push({ ...s });
  }
  return out;
}

/** `text` with every span replaced by `[REDACTED:<kind>]`. */
export function redactSpans(text: string, spans: readonly Span[]): string {
  let out = "";
  let at = 0;
  for (const s of mergeSpans(spans)) {
    out += `${text.slice(at, s.start)}[REDACTED:${s.kind}]`;
    at = s.end;
  }
  return out + text.slice(at);
}

/** Runs a global native regular expression over `text`, calling `each` for every match. */
export function eachMatch(re: RegExp, text: string, each: (m: RegExpExecArray) => void): void {
  re.lastIndex = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    each(m);
    if (m[0].length === 0) re.lastIndex++;
  }
}
