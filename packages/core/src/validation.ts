import { z } from "zod";
import { ValidationFailed, type ValidationIssue } from "./errors.ts";

export type Location = "body" | "query" | "path" | "header";

/** A 422 echoes a failing value as `input` only when its JSON is at most this long; bigger ones are left out. */
export const MAX_ECHOED_INPUT_CHARS = 1024;

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A header's value as its sender wrote it. Node reads a header's bytes as
 * latin1, one character a byte, so UTF-8 text arrives garbled ("cafÃ©" for
 * "café"): bytes that are valid UTF-8 are read as UTF-8, any others kept as
 * they came. For what a 422 echoes of a header, and what is checked of it.
 */
export function headerText(value: string): string {
  // Only a value of bytes (every character below U+0100) with one above ASCII can be UTF-8 read as latin1.
  if (!/[\x80-\xff]/.test(value) || /[\u0100-\uffff]/.test(value)) return value;
  try {
    return UTF8.decode(Buffer.from(value, "latin1"));
  } catch {
    return value;
  }
}

/**
 * Text kept exactly as sent wherever it goes: no U+0000 (PostgreSQL's `text`
 * refuses it) and no lone surrogate (it cannot be UTF-8, so it would become
 * U+FFFD). For fields stored as text or sent on as names; content is stored
 * as JSON, which keeps both.
 */
export function storableText<T extends z.ZodString>(schema: T): T {
  return schema.refine((text) => text.isWellFormed() && !text.includes("\u0000"), {
    message: "String should contain neither U+0000 nor a lone surrogate",
  }) as T;
}

/** Schemas of fields that may hold a secret (`secretField`). */
const SECRET_FIELDS = new WeakSet<z.ZodType>();
/** Schemas picked by looking at the value (`choosing`), with how they pick. */
const CHOOSERS = new WeakMap<z.ZodType, (value: unknown) => z.ZodType>();

/**
 * Marks a field that may hold a secret (a token, a credential's header
 * value): a 422 never echoes it as `input`, nor anything holding it (an
 * object that fails as a whole, its unknown fields, which may be the secret
 * misspelt), and the OpenAPI document shows it `writeOnly`. Marked where the
 * field's schema is declared, so every route that takes it is covered.
 */
export function secretField<T extends z.ZodType>(schema: T): T {
  const marked = schema.meta({ writeOnly: true }) as T;
  SECRET_FIELDS.add(marked);
  return marked;
}

/**
 * Tells validation that `schema` validates with whatever `choose` picks for
 * the value (a transform zod cannot see into), so a 422 still finds the
 * secret fields of the picked schema.
 */
export function choosing<T extends z.ZodType>(schema: T, choose: (value: unknown) => z.ZodType): T {
  CHOOSERS.set(schema, choose);
  return schema;
}

type Def = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  getter?: () => z.ZodType;
  options?: readonly z.ZodType[];
  left?: z.ZodType;
  right?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  element?: z.ZodType;
  items?: readonly z.ZodType[];
  rest?: z.ZodType | null;
  valueType?: z.ZodType;
};
const defOf = (schema: z.ZodType) => schema._zod.def as unknown as Def;

const defined = <T>(value: T | null | undefined): value is T => value !== undefined && value !== null;

/** The schemas a schema stands for at the same place of a value: wrappers' inner ones, each option, the one picked. */
function forms(schema: z.ZodType, value: unknown, depth = 0): z.ZodType[] {
  if (depth > 32) return [schema];
  const choose = CHOOSERS.get(schema);
  if (choose) return [schema, ...forms(choose(value), value, depth + 1)];
  const def = defOf(schema);
  const inner = [def.innerType, def.in, def.out, def.left, def.right, ...(def.options ?? [])];
  if (def.type === "lazy" && def.getter) inner.push(def.getter());
  return [schema, ...inner.filter(defined).flatMap((s) => forms(s, value, depth + 1))];
}

/**
 * The schema a schema of this def gives its value's `key`: a list's item (or a tuple's), an object's
 * field (else its catchall), a record's values.
 */
function childOf(def: Def, key: PropertyKey): z.ZodType | undefined {
  if (typeof key === "number") return def.element ?? def.items?.[key] ?? def.rest ?? undefined;
  if (def.shape && typeof key === "string" && Object.hasOwn(def.shape, key)) return def.shape[key];
  return def.catchall ?? def.valueType;
}

/** Whether anything of a value of `schema` may be a secret: a secret field, or a picked schema, inside it. */
const MAY_HOLD_SECRET = new WeakMap<z.ZodType, boolean>();
function mayHoldSecret(schema: z.ZodType): boolean {
  const known = MAY_HOLD_SECRET.get(schema);
  if (known !== undefined) return known;
  // A schema inside itself (z.lazy) adds nothing it does not already hold.
  MAY_HOLD_SECRET.set(schema, false);
  const def = defOf(schema);
  const related = [
    def.innerType,
    def.in,
    def.out,
    def.left,
    def.right,
    ...(def.options ?? []),
    def.type === "lazy" ? def.getter?.() : undefined,
    ...Object.values(def.shape ?? {}),
    def.catchall,
    def.element,
    def.rest,
    ...(def.items ?? []),
    def.valueType,
  ].filter(defined);
  const found = SECRET_FIELDS.has(schema) || CHOOSERS.has(schema) || related.some(mayHoldSecret);
  MAY_HOLD_SECRET.set(schema, found);
  return found;
}

const isSecret = (schema: z.ZodType) => forms(schema, undefined).some((form) => SECRET_FIELDS.has(form));
const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * The values of `value` that sit where `schema` takes a secret, and beside
 * one in fields its object does not know (a secret misspelt): whatever an
 * issue's input holds of them is never echoed, wherever zod hangs the issue
 * (a union's problem comes with the whole object as its input).
 */
function secretValues(schema: z.ZodType, value: unknown, out: Set<unknown>, depth = 0): void {
  if (depth > 64 || value === undefined || !mayHoldSecret(schema)) return;
  const here = forms(schema, value);
  if (here.some((form) => SECRET_FIELDS.has(form))) {
    out.add(value);
    return;
  }
  const defs = here.map(defOf);
  const takesRecord = defs.some((def) => def.shape || def.valueType);
  const takesList = defs.some((def) => def.element || def.items);
  if (isRecord(value) ? !takesRecord : Array.isArray(value) ? !takesList : takesRecord || takesList) {
    // Not the shape that holds the secret (a list or a string where its object was due): it may be the
    // secret itself, sent another way.
    out.add(value);
    return;
  }
  if (isRecord(value)) {
    // An object's fields, by every form that may be the one (a union's options): a field no form knows,
    // beside a secret one, may be that secret misspelt.
    const shapes = defs.filter((def) => def.shape);
    const besideSecret = shapes.some((def) => Object.values(def.shape!).some(isSecret));
    for (const [key, field] of Object.entries(value)) {
      if (besideSecret && !shapes.some((def) => Object.hasOwn(def.shape!, key))) out.add(field);
      for (const child of defs.map((def) => childOf(def, key)).filter(defined))
        secretValues(child, field, out, depth + 1);
    }
  } else if (Array.isArray(value)) {
    for (const def of defs)
      for (const [i, item] of value.entries()) {
        const child = childOf(def, i);
        if (child) secretValues(child, item, out, depth + 1);
      }
  }
}

/** The schemas that check the place `path` of a value of `schema` (each form that may be the one). */
function schemasAt(schema: z.ZodType, value: unknown, path: readonly PropertyKey[]): z.ZodType[] {
  let here = forms(schema, value);
  let at = value;
  for (const key of path) {
    const children = here.map((form) => childOf(defOf(form), key));
    at = at !== null && typeof at === "object" ? (at as Record<PropertyKey, unknown>)[key] : undefined;
    here = children.filter(defined).flatMap((child) => forms(child, at));
  }
  return here;
}

/**
 * Whether the number at `path` may have a fraction (a `z.number()`, not a `z.int()`): pydantic's
 * `float_type` then, not `int_type`. zod says "expected number" for both.
 */
function takesFraction(validated: { schema: z.ZodType; value: unknown }, path: readonly PropertyKey[]) {
  return schemasAt(validated.schema, validated.value, path).some(
    (form) => form instanceof z.ZodNumber && !form.isInt,
  );
}

/** Whether `input` is or holds one of `secrets` (it is small: only what fits an echo is looked at). */
function holdsAny(input: unknown, secrets: ReadonlySet<unknown>): boolean {
  if (secrets.size === 0) return false;
  const pending = [input];
  while (pending.length > 0) {
    const next = pending.pop();
    if (secrets.has(next)) return true;
    if (next !== null && typeof next === "object") pending.push(...Object.values(next));
  }
  return false;
}

/**
 * A whole number in a query string, checked by `schema` (`z.int().min(1)`, …): digits become the number;
 * anything else (`abc`, an empty value, the parameter twice) fails as itself, so a 422 echoes what was sent
 * rather than what a coercion made of it (`NaN`, shown as null; `0` for an empty value).
 */
export function queryInt<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (typeof v === "string" && /^[+-]?\d{1,15}$/.test(v) ? Number(v) : v), schema);
}

/**
 * Turns zod issues into pydantic-style validation items, because clients of
 * the original API parse `type` and `loc` (docs/adr/0007-validation-error-shape.md).
 * Given the schema and the value validated, no item's `input` holds what the
 * value put in a secret field (`secretField`).
 */
export function toValidationIssues(
  location: Location,
  issues: readonly z.core.$ZodIssue[],
  validated?: { schema: z.ZodType; value: unknown },
): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const secrets = new Set<unknown>();
  if (validated) secretValues(validated.schema, validated.value, secrets);
  const echoed = (input: unknown) => {
    const echo = echoOf(input);
    return "input" in echo && holdsAny(echo.input, secrets) ? {} : echo;
  };
  for (const issue of withoutSafeIntegerBounds(issues)) {
    const loc = [location, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
    const input = (issue as { input?: unknown }).input;
    const hasInput = input !== undefined; // JSON has no undefined: an undefined input is an absent field
    const item = (type: string, msg: string, ctx?: Record<string, unknown>): ValidationIssue => ({
      loc,
      msg,
      type,
      ...echoed(input),
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
        const fraction =
          issue.expected === "number" && validated !== undefined && takesFraction(validated, issue.path);
        out.push(
          fraction ? item("float_type", "Input should be a valid number") : typeIssue(issue.expected, item),
        );
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
            ...echoed(value),
          });
        }
        break;
      case "invalid_format":
        if (issue.format === "url") out.push(item("url_parsing", "Input should be a valid URL"));
        else if (issue.format === "regex") out.push(item("string_pattern_mismatch", issue.message));
        else out.push(item("value_error", issue.message));
        break;
      case "invalid_key":
        // A record's key that its key schema refuses (too long, say): what the key schema said of it.
        out.push(
          ...toValidationIssues(
            location,
            issue.issues.map((inner) => ({
              input: issue.path.at(-1),
              ...inner,
              path: [...issue.path, ...(inner.path ?? [])],
            })) as z.core.$ZodIssue[],
            validated,
          ),
        );
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
export function echoOf(input: unknown): { input?: unknown } {
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
    // A number with no schema at hand to say it may have a fraction (`takesFraction`): an integer.
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

/**
 * zod's `int()` bounds an integer to the safe integers too: past them, a field with a bound of its
 * own (`max(10)`) got two issues, zod's and the field's. The field's, the tighter, is what it takes.
 */
function withoutSafeIntegerBounds(issues: readonly z.core.$ZodIssue[]): readonly z.core.$ZodIssue[] {
  const safeBound = (issue: z.core.$ZodIssue) =>
    (issue.code === "too_big" && issue.maximum === Number.MAX_SAFE_INTEGER) ||
    (issue.code === "too_small" && issue.minimum === Number.MIN_SAFE_INTEGER);
  if (!issues.some(safeBound)) return issues;
  const samePath = (a: z.core.$ZodIssue, b: z.core.$ZodIssue) =>
    a.path.length === b.path.length && a.path.every((p, i) => p === b.path[i]);
  return issues.filter(
    (issue) =>
      !safeBound(issue) ||
      !issues.some((other) => other !== issue && other.code === issue.code && samePath(other, issue)),
  );
}

/** Parses `value` with `schema`, throwing a 422 `ValidationFailed` located at `location`. */
export function validate<S extends z.ZodType>(location: Location, schema: S, value: unknown): z.output<S> {
  requirePresent(location, value);
  return outcome(location, schema.safeParse(value, { reportInput: true }), schema, value);
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
  return outcome(location, result, schema, value);
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

function outcome<T>(
  location: Location,
  result: z.ZodSafeParseResult<T>,
  schema: z.ZodType,
  value: unknown,
): T {
  if (result.success) return result.data;
  throw new ValidationFailed(toValidationIssues(location, result.error.issues, { schema, value }));
}
