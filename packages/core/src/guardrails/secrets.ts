/**
 * `secrets`: credentials of common formats. Every expression starts after a
 * character that cannot be part of the token (a lookbehind), so each position
 * of a long run is tried once and a match stays linear in the text.
 */
import { eachMatch, type MatchOptions, type Span } from "./span.ts";

const B = "(?<![A-Za-z0-9_-])";
const E = "(?![A-Za-z0-9_-])";

/** Kind of secret and the expression that finds it; the first kind that matches a span names it. */
const SECRET_FORMATS: [kind: string, re: RegExp][] = [
  ["anthropic_key", new RegExp(`${B}sk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}${E}`, "g")],
  ["openai_key", new RegExp(`${B}sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}${E}`, "g")],
  ["gateway_key", new RegExp(`${B}gwsk_[A-Za-z0-9_-]{20,}${E}`, "g")],
  ["aws_access_key", /(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}(?![A-Z0-9])/g],
  [
    "aws_secret_key",
    /(?<![A-Za-z0-9/+])(?:aws_secret_access_key|secretaccesskey)["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/gi,
  ],
  [
    "github_token",
    new RegExp(`${B}(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})${E}`, "g"),
  ],
  ["slack_token", new RegExp(`${B}xox[abposr]-[A-Za-z0-9-]{10,250}${E}`, "g")],
  ["google_api_key", new RegExp(`${B}AIza[0-9A-Za-z_-]{35}${E}`, "g")],
  ["stripe_key", new RegExp(`${B}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}${E}`, "g")],
  ["jwt", new RegExp(`${B}eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}${E}`, "g")],
];

const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;

export function matchSecrets(text: string, options: MatchOptions = {}): Span[] {
  const spans: Span[] = [];
  for (const [kind, re] of SECRET_FORMATS) {
    eachMatch(re, text, (m) => {
      const end = m.index + m[0].length;
      if (!(options.partial && end === text.length)) spans.push({ start: m.index, end, kind });
    });
  }
  // A private key runs from its BEGIN line to its END line; without one, to the end of the text (fail closed).
  eachMatch(PEM_BEGIN, text, (m) => {
    PEM_END.lastIndex = m.index + m[0].length;
    const end = PEM_END.exec(text);
    const to = end ? end.index + end[0].length : text.length;
    spans.push({ start: m.index, end: to, kind: "private_key" });
    PEM_BEGIN.lastIndex = Math.max(PEM_BEGIN.lastIndex, to);
  });
  return spans;
}
