import type { z } from "zod";
import { ValidationFailed, type ValidationIssue } from "./errors.ts";

export type Location = "body" | "query" | "path" | "header";

/** A 422 echoes a failing value as `input` only when its JSON is at most this long; bigger ones are left out. */
export const MAX_ECHOED_INPUT_CHARS = 1024;

/**
 * Turns zod issues into pydantic-style validation items, because clients of
 * the original API parse `type` and `loc` (docs/adr/0007-validation-error-shape.md).
 */
export function toValidationIssues(
  location: Location,
  issues: readonly z.core.$ZodIssue[],
): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const issue of issues) {
    const loc = [location, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
    const input = (issue as { input?: unknown }).input;
    const hasInput = input !== undefined; // JSON has no undefined: an undefined input is an absent field
    const item = (type: string, msg: string, ctx?: Record<string, unknown>): ValidationIssue => ({
      loc,
      msg,
      type,
      ...echo(input),
      ...(ctx ? { ctx } : {}),
    });
    // An absent field fails a union too (no option accepts undefined): that is still "missing".
    if ((issue.code === "invalid_union" || issue.code === "invalid_value") && !hasInput) {
      out.push({ loc, msg: "Field required", type: "missing" });
      continue;
    }
    switch (issue.code) {
      case "invalid_type": {
        if (!hasInput) {
          out.push({ loc, msg: "Field required", type: "missing" });
          break;
        }
        out.push(typeIssue(issue.expected, item));
        break;
      }
      case "too_small":
      case "too_big": {
        out.push(sizeIssue(issue, item));
        break;
      }
      case "invalid_value": {
        const expected = formatChoices(issue.values);
        out.push(item("enum", `Input should be ${expected}`, { expected }));
        break;
      }
      case "unrecognized_keys":
        for (const key of issue.keys) {
          const value = (input as Record<string, unknown> | undefined)?.[key];
          out.push({
            loc: [...loc, key],
            msg: "Extra inputs are not permitted",
            type: "extra_forbidden",
            ...echo(value),
          });
        }
        break;
      case "invalid_format":
        if (issue.format === "url") out.push(item("url_parsing", "Input should be a valid URL"));
        else if (issue.format === "regex") out.push(item("string_pattern_mismatch", issue.message));
        else out.push(item("value_error", issue.message));
        break;
      case "custom": {
        // A refinement may name pydantic's type for its problem (e.g. `datetime_future`).
        const type = (issue.params as { type?: unknown } | undefined)?.type;
        out.push(item(typeof type === "string" ? type : "value_error", issue.message));
        break;
      }
      default:
        out.push(item("value_error", issue.message));
    }
  }
  return out;
}

/** `{input}` when the value is small enough to send back, else nothing. */
function echo(input: unknown): { input?: unknown } {
  return input !== undefined && jsonFits(input, MAX_ECHOED_INPUT_CHARS) ? { input } : {};
}

/**
 * Whether `value` serialises to about `budget` characters or fewer, found
 * without serialising it: the walk stops as soon as the budget is spent, so
 * a huge or deeply nested value costs no more than a small one.
 */
function jsonFits(value: unknown, budget: number): boolean {
  const pending = [value];
  let size = 0;
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") size += next.length + 2;
    else if (next !== null && typeof next === "object") {
      size += 2;
      for (const key in next) {
        size += key.length + 4;
        if (size > budget) return false;
        pending.push((next as Record<string, unknown>)[key]);
      }
    } else size += String(next).length;
    if (size > budget) return false;
  }
  return true;
}

/** pydantic's wording: `'a', 'b' or 'c'`. */
function formatChoices(values: readonly unknown[]): string {
  const quoted = values.map((v) => `'${String(v)}'`);
  return quoted.length < 2 ? (quoted[0] ?? "") : `${quoted.slice(0, -1).join(", ")} or ${quoted.at(-1)}`;
}

type ItemFn = (type: string, msg: string, ctx?: Record<string, unknown>) => ValidationIssue;

function typeIssue(expected: string, item: ItemFn): ValidationIssue {
  switch (expected) {
    case "string":
      return item("string_type", "Input should be a valid string");
    // Every number this API accepts is an integer.
    case "int":
    case "number":
      return item("int_type", "Input should be a valid integer");
    case "boolean":
      return item("bool_type", "Input should be a valid boolean");
    case "array":
      return item("list_type", "Input should be a valid list");
    case "object":
    case "record":
      return item("dict_type", "Input should be a valid dictionary");
    default:
      return item(`${expected}_type`, `Input should be a valid ${expected}`);
  }
}

function sizeIssue(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig, item: ItemFn): ValidationIssue {
  const small = issue.code === "too_small";
  const bound = Number(
    small ? (issue as z.core.$ZodIssueTooSmall).minimum : (issue as z.core.$ZodIssueTooBig).maximum,
  );
  switch (issue.origin) {
    case "string": {
      const plural = bound === 1 ? "character" : "characters";
      return small
        ? item("string_too_short", `String should have at least ${bound} ${plural}`, { min_length: bound })
        : item("string_too_long", `String should have at most ${bound} ${plural}`, { max_length: bound });
    }
    case "array":
    case "set": {
      const plural = bound === 1 ? "item" : "items";
      return small
        ? item("too_short", `List should have at least ${bound} ${plural}`, { min_length: bound })
        : item("too_long", `List should have at most ${bound} ${plural}`, { max_length: bound });
    }
    default:
      if (issue.inclusive === false) {
        return small
          ? item("greater_than", `Input should be greater than ${bound}`, { gt: bound })
          : item("less_than", `Input should be less than ${bound}`, { lt: bound });
      }
      return small
        ? item("greater_than_equal", `Input should be greater than or equal to ${bound}`, { ge: bound })
        : item("less_than_equal", `Input should be less than or equal to ${bound}`, { le: bound });
  }
}

/** Parses `value` with `schema`, throwing a 422 `ValidationFailed` located at `location`. */
export function validate<S extends z.ZodType>(location: Location, schema: S, value: unknown): z.output<S> {
  requirePresent(location, value);
  return outcome(location, schema.safeParse(value, { reportInput: true }));
}

/** `validate` for schemas with asynchronous checks (e.g. ones that ask the file system or `git`). */
export async function validateAsync<S extends z.ZodType>(
  location: Location,
  schema: S,
  value: unknown,
): Promise<z.output<S>> {
  requirePresent(location, value);
  const result = await schema.safeParseAsync(value, { reportInput: true });
  if (!result.success) result.error.issues.sort(byField(schema));
  return outcome(location, result);
}

/**
 * Asynchronous checks report after the synchronous ones; pydantic lists
 * problems in the order of the object's fields, unknown fields last.
 */
function byField(schema: z.ZodType): (a: z.core.$ZodIssue, b: z.core.$ZodIssue) => number {
  const fields = Object.keys((schema as { shape?: Record<string, unknown> }).shape ?? {});
  const rank = (issue: z.core.$ZodIssue) => {
    const index = fields.indexOf(String(issue.path[0]));
    return issue.path.length === 0 || index < 0 ? fields.length : index;
  };
  return (a, b) => rank(a) - rank(b);
}

function requirePresent(location: Location, value: unknown): void {
  if (location === "body" && value === undefined) {
    throw new ValidationFailed([{ loc: ["body"], msg: "Field required", type: "missing" }]);
  }
}

function outcome<T>(location: Location, result: z.ZodSafeParseResult<T>): T {
  if (result.success) return result.data;
  throw new ValidationFailed(toValidationIssues(location, result.error.issues));
}
