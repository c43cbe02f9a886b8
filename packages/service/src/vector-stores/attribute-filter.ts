/**
 * OpenAI's attribute filters of vector store searches (`ComparisonFilter`,
 * `CompoundFilter`), compiled to a SQL condition on the `attributes` jsonb
 * column. Every key and value goes as a parameter; the SQL text holds only
 * operators this module writes.
 *
 * Semantics, where OpenAI's documentation leaves them open:
 * - `eq`, `in`: the attribute is present and equal (numbers by value: 1 equals 1.0; a string never equals a number);
 * - `ne`, `nin`: the attribute is absent or not equal;
 * - `gt`, `gte`, `lt`, `lte`: the attribute is present, of the value's type (number or string), and compares
 *   so (numbers by value, strings by the database's collation);
 * - `and` of no filters matches everything, `or` of none matches nothing.
 */
import { ValidationFailed } from "@gw/core/errors";
import { postgresCanHold } from "@gw/core/postgres";

/** An attribute's value (OpenAI: strings of up to 512 characters, numbers, booleans). */
export type AttributeValue = string | number | boolean;
/** A file's attributes in a vector store: up to 16 keys of up to 64 characters. */
export type Attributes = Readonly<Record<string, AttributeValue>>;

export type ComparisonType = "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "in" | "nin";

export interface ComparisonFilter {
  type: ComparisonType;
  key: string;
  value: AttributeValue | readonly (string | number)[];
}

export interface CompoundFilter {
  type: "and" | "or";
  filters: readonly AttributeFilter[];
}

export type AttributeFilter = ComparisonFilter | CompoundFilter;

/** Deepest nesting of compound filters a filter may have (the filter itself is depth 1). */
export const MAX_FILTER_DEPTH = 8;
/** Most comparisons one filter may hold, and most values one `in`/`nin` may list. */
export const MAX_FILTER_COMPARISONS = 64;
export const MAX_FILTER_LIST = 1_000;

/** A filter this module does not take (the route's schema should have refused it first): a 422 at `filters`. */
export class InvalidAttributeFilter extends ValidationFailed {
  constructor(message: string) {
    super([{ loc: ["body", "filters"], msg: message, type: "value_error" }]);
    this.name = "InvalidAttributeFilter";
  }
}

/** Adds a value to the statement's parameters and answers its placeholder (`$3`). */
export type AddParameter = (value: unknown) => string;

const ORDERED: Record<string, string> = { gt: ">", gte: ">=", lt: "<", lte: "<=" };

/** A string PostgreSQL can hold (no U+0000: neither text nor jsonb can), or a finite number. */
const isStringOrNumber = (value: unknown): value is string | number =>
  (typeof value === "string" && postgresCanHold(value)) ||
  (typeof value === "number" && Number.isFinite(value));
const isScalar = (value: unknown): value is AttributeValue =>
  typeof value === "boolean" || isStringOrNumber(value);

const COMPARISON_TYPES = new Set<unknown>(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]);

/**
 * The SQL condition for `filter` over `column` (a jsonb expression this module
 * trusts, such as `attributes`), its values added through `parameter`.
 * Throws `InvalidAttributeFilter` for a shape, a size or a depth it does not take.
 */
export function compileAttributeFilter(
  filter: AttributeFilter,
  parameter: AddParameter,
  column = "attributes",
): string {
  let comparisons = 0;
  const compile = (node: AttributeFilter, depth: number): string => {
    if (depth > MAX_FILTER_DEPTH)
      throw new InvalidAttributeFilter(`filters nest at most ${MAX_FILTER_DEPTH} deep`);
    if (typeof node !== "object" || node === null) throw new InvalidAttributeFilter("a filter is an object");
    if (node.type === "and" || node.type === "or") {
      if (!Array.isArray(node.filters))
        throw new InvalidAttributeFilter("a compound filter has a list of filters");
      if (node.filters.length === 0) return node.type === "and" ? "TRUE" : "FALSE";
      const parts = node.filters.map((inner) => compile(inner, depth + 1));
      return `(${parts.join(node.type === "and" ? " AND " : " OR ")})`;
    }
    if (++comparisons > MAX_FILTER_COMPARISONS)
      throw new InvalidAttributeFilter(`a filter holds at most ${MAX_FILTER_COMPARISONS} comparisons`);
    const { type, key, value } = node as ComparisonFilter;
    // The type first: a filter of a type it does not know is told so, whatever else it holds.
    if (!COMPARISON_TYPES.has(type))
      throw new InvalidAttributeFilter(`unknown filter type '${String(type)}'`);
    if (typeof key !== "string" || key.length === 0 || !postgresCanHold(key))
      throw new InvalidAttributeFilter("a comparison names a key (without U+0000)");
    const attribute = `(${column} -> ${parameter(key)})`;
    switch (type) {
      case "eq":
      case "ne": {
        if (!isScalar(value))
          throw new InvalidAttributeFilter(`'${type}' compares with a string, number or boolean`);
        const json = `${parameter(JSON.stringify(value))}::jsonb`;
        return type === "eq" ? `${attribute} = ${json}` : `${attribute} IS DISTINCT FROM ${json}`;
      }
      case "gt":
      case "gte":
      case "lt":
      case "lte": {
        if (!isStringOrNumber(value))
          throw new InvalidAttributeFilter(`'${type}' compares with a string or a number`);
        // jsonb orders values of different types by type, not by value: compare only within the value's type.
        const kind = parameter(typeof value === "number" ? "number" : "string");
        return `(jsonb_typeof${attribute} = ${kind} AND ${attribute} ${ORDERED[type]} ${parameter(JSON.stringify(value))}::jsonb)`;
      }
      case "in":
      case "nin": {
        if (!Array.isArray(value) || !value.every(isStringOrNumber))
          throw new InvalidAttributeFilter(`'${type}' takes a list of strings and numbers`);
        if (value.length > MAX_FILTER_LIST)
          throw new InvalidAttributeFilter(`'${type}' lists at most ${MAX_FILTER_LIST} values`);
        const list = `${parameter(value.map((v) => JSON.stringify(v)))}::jsonb[]`;
        return type === "in"
          ? `coalesce(${attribute} = ANY(${list}), false)`
          : `NOT coalesce(${attribute} = ANY(${list}), false)`;
      }
      default:
        throw new InvalidAttributeFilter(`unknown filter type '${String(type)}'`);
    }
  };
  return compile(filter, 1);
}

/**
 * Throws `InvalidAttributeFilter` for a filter `compileAttributeFilter` would
 * refuse: for a route to refuse it before it spends anything (an embedding) on the search.
 */
export function checkAttributeFilter(filter: AttributeFilter): void {
  compileAttributeFilter(filter, () => "NULL");
}
