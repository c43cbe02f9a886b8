/** RFC 3339 `date-time` (section 5.6): `T` and `Z` in either case, a time zone always, any fraction of a second. */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * The instant an RFC 3339 `date-time` names, in milliseconds since the epoch
 * (a fraction beyond milliseconds is cut), or `undefined` when the text is
 * not one or names no real date. A leap second, `:60`, is admitted where one
 * can fall, at 23:59:60 UTC, and is the instant after 23:59:59 (the next
 * day's 00:00:00 UTC): JavaScript time, like Unix time, has no leap seconds.
 */
export function parseRfc3339(value: string): number | undefined {
  const match = DATE_TIME.exec(value);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [fraction, sign, offsetHours, offsetMinutes] = [
    match[7],
    match[8],
    Number(match[9]),
    Number(match[10]),
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  if (sign && (offsetHours > 23 || offsetMinutes > 59)) return undefined;
  const offset = sign ? (sign === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) : 0;
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(
    hour,
    minute - offset,
    Math.min(second, 59),
    fraction ? Number(fraction.slice(1, 4).padEnd(3, "0")) : 0,
  );
  if (second < 60) return at.getTime();
  if (at.getUTCHours() !== 23 || at.getUTCMinutes() !== 59) return undefined;
  return at.getTime() + 1000;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
