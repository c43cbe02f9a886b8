import { z } from "zod";

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

/** What a `dateTimeSchema` checks beyond the form: a clock whose now the instant must be after, and any bound of its own. */
export interface DateTimeChecks {
  /** The instant must lie after this clock's wall time (422 `datetime_future`). */
  future?: { wall(): number };
  /** A further bound on the instant (milliseconds since the epoch): what is wrong with it (422 `value_error`), or nothing. */
  within?: (at: number) => string | undefined;
}

/**
 * An RFC 3339 `date-time` as a request gives it (a body's field, a query's
 * instant), with pydantic's types for its problems, the same wherever one is
 * taken: `datetime_parsing` for text that names no instant, `datetime_future`
 * for one not ahead (with `future`). Its output is the instant in ISO 8601,
 * UTC, to the millisecond, which `Date` reads (a leap second it would not).
 */
export function dateTimeSchema(checks: DateTimeChecks = {}) {
  return z
    .string()
    .meta({ format: "date-time" })
    .transform((value, ctx) => {
      const refuse = (message: string, type?: string) => {
        ctx.issues.push({ code: "custom", input: value, message, ...(type ? { params: { type } } : {}) });
        return z.NEVER;
      };
      const at = parseRfc3339(value);
      if (at === undefined)
        return refuse(
          "Input should be a valid datetime (RFC 3339, e.g. 2030-01-31T12:00:00Z)",
          "datetime_parsing",
        );
      if (checks.future && at <= checks.future.wall())
        return refuse("Input should be in the future", "datetime_future");
      const beyond = checks.within?.(at);
      if (beyond !== undefined) return refuse(beyond);
      return new Date(at).toISOString();
    });
}
