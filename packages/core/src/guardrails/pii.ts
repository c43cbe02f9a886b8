/**
 * `pii`: e-mail addresses, phone numbers, card numbers (Luhn) and IBANs
 * (mod 97). Candidates start only where a run of their characters starts
 * (a lookbehind), so a long run is scanned once.
 */
import type { PiiKind } from "./checks.ts";
import { eachMatch, type MatchOptions, type Span } from "./span.ts";

const EMAIL =
  /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z0-9-])/g;
const CARD = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])/g;
const PHONE = /(?<![\w+])(?:\+|00)?\(?\d{1,4}\)?(?:[ .-]?\(?\d{1,4}\)?){2,5}(?![\w])/g;
const HAS_DIGIT = /\d/;
const IBAN = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])/g;

/** The Luhn checksum of a string of digits holds. */
export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** An IBAN's mod-97 check holds (ISO 13616). */
export function ibanValid(iban: string): boolean {
  const s = iban.replace(/ /g, "").toUpperCase();
  if (s.length < 15 || s.length > 34) return false;
  const moved = s.slice(4) + s.slice(0, 4);
  let rest = 0;
  for (const ch of moved) {
    const code = ch.charCodeAt(0);
    const value = code >= 65 ? String(code - 55) : ch;
    for (const d of value) rest = (rest * 10 + (d.charCodeAt(0) - 48)) % 97;
  }
  return rest === 1;
}

const DATE = /^\d{4}[-./]\d{1,2}[-./]\d{1,2}$|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$/;
const NATIONAL = /^(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}$|^0\d{1,4}[ .-]\d{3,4}[ .-]?\d{3,4}$/;
const DOTTED = /^\d{1,3}(?:\.\d{1,3}){2,}$/;

/** Is a candidate run of digits and separators a phone number rather than a date, an address or a version? */
function looksLikePhone(candidate: string): boolean {
  const digits = candidate.replace(/\D/g, "");
  if (digits.length < 7 || digits.length > 15) return false;
  if (DATE.test(candidate) || DOTTED.test(candidate)) return false;
  const international = candidate.startsWith("+") || candidate.startsWith("00");
  // A bare run of digits is an order number as often as a phone: only an international one is taken.
  if (/^\d+$/.test(candidate)) return false;
  if (international) return digits.length >= 8;
  // National numbers only in the shapes they are written in: 415-555-0132, (415) 555-0132, 020 7946 0958.
  return NATIONAL.test(candidate);
}

export function matchPii(text: string, kinds: readonly PiiKind[], options: MatchOptions = {}): Span[] {
  const spans: Span[] = [];
  const push = (start: number, end: number, kind: PiiKind) => {
    if (!(options.partial && end === text.length)) spans.push({ start, end, kind });
  };
  const want = new Set(kinds);
  // Every address holds an `@`, and every card, phone number and IBAN a digit: text without
  // them (most prose) is not scanned by the expressions that cannot match it.
  if (!text.includes("@")) want.delete("email");
  if (!HAS_DIGIT.test(text)) for (const kind of ["card", "phone", "iban"] as const) want.delete(kind);
  if (want.has("email")) eachMatch(EMAIL, text, (m) => push(m.index, m.index + m[0].length, "email"));
  const cards: [number, number][] = [];
  if (want.has("card") || want.has("phone")) {
    eachMatch(CARD, text, (m) => {
      const digits = m[0].replace(/\D/g, "");
      if (/^[2-6]/.test(digits) && luhn(digits)) {
        cards.push([m.index, m.index + m[0].length]);
        if (want.has("card")) push(m.index, m.index + m[0].length, "card");
      }
    });
  }
  if (want.has("phone")) {
    eachMatch(PHONE, text, (m) => {
      const start = m.index;
      const end = start + m[0].length;
      if (cards.some(([s, e]) => s < end && start < e)) return;
      if (looksLikePhone(m[0])) push(start, end, "phone");
    });
  }
  if (want.has("iban")) {
    eachMatch(IBAN, text, (m) => {
      if (ibanValid(m[0])) push(m.index, m.index + m[0].length, "iban");
    });
  }
  return spans;
}
