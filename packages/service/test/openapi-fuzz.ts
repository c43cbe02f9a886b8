import { ERROR_CATALOGUE, ERROR_CAUSES } from "@gw/core/errors";

/**
 * A seeded generator of odd requests for every operation of an OpenAPI
 * document, and the check that an answer is one the catalogue allows. Used by
 * `openapi-fuzz.test.ts`; nothing here knows a route: what it sends comes from
 * the document, the fixtures a test passes in, and a few seed bodies for
 * operations whose body the document leaves open (JSON-RPC).
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = Record<string, unknown>;

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema>; parameters?: Record<string, Parameter> };
}

interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required?: boolean;
  schema?: Schema;
}

interface Operation {
  operationId: string;
  parameters?: (Parameter | { $ref: string })[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, unknown>;
}

/** One operation of the document, with its parameters resolved. */
export interface FuzzOperation {
  method: string;
  /** The document's template, `/api/v1/llm/conversations/{id}`. */
  path: string;
  operationId: string;
  pathParams: Parameter[];
  queryParams: Parameter[];
  body: Schema | undefined;
}

/** One generated request; `body` is the raw text sent. */
export interface FuzzRequest {
  operationId: string;
  method: string;
  /** Path and query, percent-encoded as sent. */
  target: string;
  headers: Record<string, string>;
  body?: string;
}

/** mulberry32: small, fast, and the same sequence for the same seed on every machine. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Strings that have earned 5xx somewhere: NUL, lone surrogates, ids too long once encoded, separators, huge. */
export const ODD_STRINGS: readonly string[] = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "x\udc00",
  "😀".repeat(100),
  "😀".repeat(300),
  "a".repeat(257),
  "a".repeat(1025),
  "a".repeat(9000),
  "=".repeat(400),
  "../../etc/passwd",
  "%00",
  "%ZZ",
  "*",
  "a/b",
  "a?b#c",
  "\\",
  '"',
  "' OR '1'='1",
  "<script>alert(1)</script>",
  "\u202egnp.exe",
  "\r\n",
  "null",
  "-1",
  "0",
  "1e999",
  "NaN",
  "true",
  "[]",
  "{}",
  "__proto__",
  "constructor",
  "conv_00000000000000000000000000000000",
  "resp_ffffffffffffffffffffffffffffffff",
  "mcp_000000000000000000000000",
  "chatcmpl-00000000000000000000000000000000",
  "2026-13-45T99:99:99Z",
  "9999-12-31T23:59:59Z",
  "ǅǈǋ ﬀ ẞ",
];

/** The strings that broke things most: drawn half the time, so a short run meets each of them often. */
const HOT_STRINGS: readonly string[] = [
  "\u0000",
  "a\u0000b",
  "\ud800",
  "x\udc00",
  "😀".repeat(100),
  "a".repeat(1025),
];

/** JSON values of every kind, for fields whatever type they should hold. */
const ODD_VALUES: readonly Json[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  -0.0001,
  2 ** 53 + 1,
  1e308,
  -1e308,
  [],
  [null],
  {},
  { "": "" },
  JSON.parse('{"__proto__":{"polluted":true}}'),
  [[[[[[]]]]]],
  Array.from({ length: 200 }, (_, i) => i),
];

/** Raw bodies that are not what a JSON endpoint expects. */
const ODD_RAW_BODIES: readonly string[] = [
  "",
  "{",
  "null",
  "[]",
  '"x"',
  "0",
  '{"a":1,"a":2}',
  `${"[".repeat(70)}${"]".repeat(70)}`,
  '{"\\u0000":"\\u0000"}',
  '{"x":"\\ud800"}',
  "\u0000",
  "{}garbage",
];

/** Odd `X-On-Behalf-Of` values a fetch can send (no NUL, CR or LF: the client refuses those itself). */
const ODD_HEADER_VALUES: readonly string[] = [
  "*",
  "a".repeat(300),
  "alice, bob",
  "é",
  "\u00ff\u00fe",
  "a\tb",
  "backend",
  "../admin",
  "%00",
  "=00",
  "root",
];

/** Resolves `$ref`s to `#/components/...`. */
function resolver(document: OpenApiDocument) {
  return <T>(value: T | { $ref: string }): T => {
    let current: unknown = value;
    for (let hops = 0; hops < 20 && current && typeof current === "object" && "$ref" in current; hops++) {
      const ref = (current as { $ref: string }).$ref;
      current = ref
        .replace(/^#\//, "")
        .split("/")
        .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], document);
    }
    return current as T;
  };
}

/** Every operation of the document, in its order. */
export function operationsOf(document: OpenApiDocument): FuzzOperation[] {
  const resolve = resolver(document);
  const out: FuzzOperation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const parameters = (operation.parameters ?? []).map((p) => resolve<Parameter>(p));
      const json = operation.requestBody?.content?.["application/json"]?.schema;
      out.push({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId,
        pathParams: parameters.filter((p) => p.in === "path"),
        queryParams: parameters.filter((p) => p.in === "query"),
        body: json ? resolve<Schema>(json) : undefined,
      });
    }
  }
  return out;
}

/** Percent-encodes every code unit, lone surrogates too (as the bytes WTF-8 gives them), so any string can be sent. */
export function percentEncode(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(text.slice(i, i + 2));
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      out += `%${(0xe0 | (unit >> 12)).toString(16).toUpperCase()}%${(0x80 | ((unit >> 6) & 0x3f)).toString(16).toUpperCase()}%${(0x80 | (unit & 0x3f)).toString(16).toUpperCase()}`;
    } else out += encodeURIComponent(text[i]!);
  }
  return out;
}

const encodePairs = (pairs: [string, string][]) =>
  pairs.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join("&");

/** A place of a request a value goes, for requests odd in that one place. */
type Slot = { kind: "path" | "query"; name: string } | { kind: "body"; body: Json; at: (string | number)[] };

/** What a fuzzer knows of the stack: real ids by the name of a path or body field, so requests reach past lookups. */
export interface Fixtures {
  /** Values for a path parameter, by `<segment before it>/{<name>}` (`conversations/{id}`) or `{<name>}`. */
  pathParams: Record<string, string>;
  /** Valid values for body fields and query parameters, by field name (`resourceId`, `model`). */
  fields: Record<string, Json>;
  /** Seed bodies for operations the document describes loosely (`type: object`), by operationId. */
  seeds: Record<string, Json[]>;
}

export class RequestFuzzer {
  private readonly random: () => number;
  private readonly resolve: ReturnType<typeof resolver>;
  private readonly fixtures: Fixtures;

  constructor(document: OpenApiDocument, seed: number, fixtures: Fixtures) {
    this.random = seededRandom(seed);
    this.resolve = resolver(document);
    this.fixtures = fixtures;
  }

  private chance(p: number): boolean {
    return this.random() < p;
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  /**
   * `count` requests for the operation: the first as valid as the fixtures allow; then each optional
   * query parameter alone, valid; then, for at most a third of the rest, each place a value goes (a path
   * or query parameter, a string in a body) in turn holding one of `HOT_STRINGS`, the rest valid; then
   * requests odd in random places and ways.
   */
  requests(operation: FuzzOperation, count: number): FuzzRequest[] {
    const out = [this.request(operation, false)];
    // Each optional query parameter alone, valid: a filter reaches the store only when nothing else fails.
    for (const param of operation.queryParams.filter((p) => !p.required).slice(0, Math.floor(count / 4)))
      out.push(this.targeted(operation, { kind: "query", name: param.name }, this.queryValue(param)));
    const slots = this.places(operation);
    const targeted = Math.min(slots.length * HOT_STRINGS.length, Math.floor(count / 3));
    for (let k = 0; k < targeted && out.length < count; k++) {
      const slot = slots[k % slots.length]!;
      const hot = HOT_STRINGS[(k + Math.floor(k / slots.length)) % HOT_STRINGS.length]!;
      out.push(this.targeted(operation, slot, hot));
    }
    while (out.length < count) out.push(this.request(operation, true));
    return out;
  }

  /** Every place of a valid request a value goes: path and query parameters, and each string of each body. */
  private places(operation: FuzzOperation): Slot[] {
    const slots: Slot[] = [
      ...operation.pathParams.map((p) => ({ kind: "path" as const, name: p.name })),
      ...operation.queryParams.map((p) => ({ kind: "query" as const, name: p.name })),
    ];
    if (operation.body === undefined) return slots;
    const bodies = this.fixtures.seeds[operation.operationId] ?? [this.valueOf(operation.body, "", 0)];
    for (const body of bodies) {
      const walk = (node: Json, at: (string | number)[]) => {
        if (typeof node === "string") slots.push({ kind: "body", body, at });
        else if (Array.isArray(node)) for (const [i, child] of node.entries()) walk(child, [...at, i]);
        else if (node !== null && typeof node === "object")
          for (const [key, child] of Object.entries(node)) walk(child, [...at, key]);
      };
      walk(body, []);
    }
    return slots;
  }

  private targeted(operation: FuzzOperation, slot: Slot, value: string): FuzzRequest {
    let body: Json | undefined;
    if (slot.kind === "body" && slot.at.length === 0) body = value;
    else if (slot.kind === "body") {
      body = structuredClone(slot.body);
      const parent = slot.at
        .slice(0, -1)
        .reduce<Json>((node, key) => (node as Record<string, Json>)[key]!, body);
      (parent as Record<string | number, Json>)[slot.at.at(-1)!] = value;
    } else if (operation.body !== undefined) body = this.validBody(operation);
    const pairs = operation.queryParams
      .filter((p) => p.required || (slot.kind === "query" && p.name === slot.name))
      .map((p): [string, string] => [
        p.name,
        slot.kind === "query" && p.name === slot.name ? value : this.queryValue(p),
      ]);
    return this.build(operation, {
      path: (param) =>
        slot.kind === "path" && param.name === slot.name ? value : this.pathValue(operation.path, param),
      query: encodePairs(pairs),
      headers: {},
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  }

  private request(operation: FuzzOperation, odd: boolean): FuzzRequest {
    // Which parts are odd: at least one, unless this is the valid case.
    let parts = { path: false, query: false, body: false, headers: false };
    while (odd && !Object.values(parts).some(Boolean)) {
      parts = {
        path: operation.pathParams.length > 0 && this.chance(0.4),
        query: this.chance(0.35),
        body: operation.body !== undefined && this.chance(0.6),
        headers: this.chance(0.2),
      };
    }
    const headers: Record<string, string> = {};
    if (parts.headers) {
      const which = this.random();
      if (which < 0.6) headers["x-on-behalf-of"] = this.pick(ODD_HEADER_VALUES);
      else if (which < 0.75) headers["x-request-id"] = this.pick(ODD_HEADER_VALUES);
      else if (which < 0.85) headers["mcp-protocol-version"] = this.pick(ODD_HEADER_VALUES);
      else headers.accept = this.pick(["text/event-stream", "*/*;q=0", "application/xml"]);
    }
    let body: string | undefined;
    if (operation.body !== undefined)
      body = parts.body ? this.oddBody(operation) : JSON.stringify(this.validBody(operation));
    else if (parts.body && operation.method !== "GET")
      body = JSON.stringify({ unexpected: this.oddString() });
    return this.build(operation, {
      path: (param) =>
        parts.path && this.chance(0.7) ? this.oddString() : this.pathValue(operation.path, param),
      query: this.query(operation, parts.query),
      headers,
      ...(body !== undefined ? { body } : {}),
    });
  }

  private build(
    operation: FuzzOperation,
    parts: {
      path: (param: Parameter) => string;
      query: string;
      headers: Record<string, string>;
      body?: string;
    },
  ): FuzzRequest {
    let path = operation.path;
    for (const param of operation.pathParams)
      path = path.replace(`{${param.name}}`, percentEncode(parts.path(param)));
    const headers =
      parts.body !== undefined ? { ...parts.headers, "content-type": "application/json" } : parts.headers;
    return {
      operationId: operation.operationId,
      method: operation.method,
      target: parts.query ? `${path}?${parts.query}` : path,
      headers,
      ...(parts.body !== undefined ? { body: parts.body } : {}),
    };
  }

  private oddString(): string {
    return this.pick(this.chance(0.5) ? HOT_STRINGS : ODD_STRINGS);
  }

  private pathValue(template: string, param: Parameter): string {
    const before = template
      .slice(0, template.indexOf(`{${param.name}}`))
      .split("/")
      .filter(Boolean)
      .at(-1);
    const known =
      this.fixtures.pathParams[`${before}/{${param.name}}`] ?? this.fixtures.pathParams[`{${param.name}}`];
    if (known !== undefined) return known;
    const generated = this.valueOf(param.schema ?? { type: "string" }, param.name, 0);
    return typeof generated === "string" ? generated : String(generated);
  }

  private query(operation: FuzzOperation, odd: boolean): string {
    const pairs: [string, string][] = [];
    for (const param of operation.queryParams) {
      const roll = this.random();
      if (!odd || roll < 0.5) {
        if (param.required || this.chance(0.3)) pairs.push([param.name, this.queryValue(param)]);
      } else if (roll < 0.85) pairs.push([param.name, this.oddString()]);
      else {
        // Repeated, or bracketed as qs would read it into an array or an object.
        const form = this.pick([param.name, `${param.name}[]`, `${param.name}[x]`]);
        pairs.push([form, this.queryValue(param)], [form, this.oddString()]);
      }
    }
    if (odd && this.chance(0.3)) pairs.push([this.pick(["unknown", "__proto__", "a".repeat(300)]), "1"]);
    return encodePairs(pairs);
  }

  private queryValue(param: Parameter): string {
    const known = this.fixtures.fields[param.name];
    if (known !== undefined && typeof known !== "object") return String(known);
    const value = this.valueOf(param.schema ?? { type: "string" }, param.name, 0);
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  private validBody(operation: FuzzOperation): Json {
    const seeds = this.fixtures.seeds[operation.operationId];
    if (seeds?.length) return structuredClone(this.pick(seeds));
    return this.valueOf(operation.body!, "", 0);
  }

  private oddBody(operation: FuzzOperation): string {
    if (this.chance(0.12)) return this.pick(ODD_RAW_BODIES);
    const body = this.validBody(operation);
    let mutated: Json = body;
    const rounds = 1 + Math.floor(this.random() * 3);
    for (let i = 0; i < rounds; i++) mutated = this.mutate(mutated);
    return JSON.stringify(mutated);
  }

  /** One change somewhere in `value`: a leaf replaced, a field removed, a field added. */
  private mutate(value: Json): Json {
    const slots = this.slots(value);
    const slot = this.pick(slots);
    const replacement = (): Json =>
      this.chance(0.65) ? this.oddString() : structuredClone(this.pick(ODD_VALUES));
    if (!slot) return replacement();
    const { parent, key } = slot;
    const roll = this.random();
    if (Array.isArray(parent)) {
      if (roll < 0.8) parent[key as number] = replacement();
      else parent.push(replacement());
    } else if (roll < 0.6) parent[key] = replacement();
    else if (roll < 0.8) delete parent[key];
    // defineProperty: `__proto__` becomes an own field, as JSON.parse makes it, not the prototype.
    else
      Object.defineProperty(
        parent,
        this.pick(["extra", "__proto__", "constructor", "😀", "a".repeat(200), `${key}_`]),
        {
          value: replacement(),
          enumerable: true,
          writable: true,
          configurable: true,
        },
      );
    return value;
  }

  private slots(value: Json): { parent: Json[] | { [key: string]: Json }; key: string | number }[] {
    const out: { parent: Json[] | { [key: string]: Json }; key: string | number }[] = [];
    const walk = (node: Json, depth: number) => {
      if (depth > 12 || node === null || typeof node !== "object") return;
      const entries = Array.isArray(node) ? node.map((v, i) => [i, v] as const) : Object.entries(node);
      for (const [key, child] of entries) {
        out.push({ parent: node, key });
        walk(child, depth + 1);
      }
    };
    walk(value, 0);
    return out;
  }

  /** A value the schema accepts, as far as one can tell without a regex engine in reverse; fixtures first. */
  private valueOf(raw: Schema, name: string, depth: number): Json {
    const schema = this.resolve<Schema>(raw);
    const known = this.fixtures.fields[name];
    if (known !== undefined && depth > 0) return structuredClone(known);
    if ("const" in schema) return schema.const as Json;
    if (Array.isArray(schema.enum)) return this.pick(schema.enum as Json[]);
    const options = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
    if (options?.length) return this.valueOf(this.pick(options), name, depth);
    if (Array.isArray(schema.allOf)) {
      const merged: Schema = {};
      for (const part of schema.allOf as Schema[]) Object.assign(merged, this.resolve<Schema>(part));
      return this.valueOf(merged, name, depth);
    }
    if ("default" in schema && this.chance(0.3)) return schema.default as Json;
    const types = Array.isArray(schema.type)
      ? (schema.type as string[])
      : [schema.type as string | undefined];
    const type = this.pick(
      types.filter((t) => t !== "null").length ? types.filter((t) => t !== "null") : types,
    );
    switch (type) {
      case "object":
      case undefined: {
        if (type === undefined && !schema.properties) return "x";
        if (depth > 6) return {};
        const out: { [key: string]: Json } = {};
        const properties = (schema.properties ?? {}) as Record<string, Schema>;
        const required = new Set((schema.required ?? []) as string[]);
        for (const [key, child] of Object.entries(properties)) {
          if (required.has(key) || this.chance(0.3)) out[key] = this.valueOf(child, key, depth + 1);
        }
        return out;
      }
      case "array": {
        if (depth > 6) return [];
        const min = Number(schema.minItems ?? 0);
        const length = Math.max(
          min,
          Math.min(Number(schema.maxItems ?? 2), 1 + Math.floor(this.random() * 2)),
        );
        return Array.from({ length }, () => this.valueOf((schema.items ?? {}) as Schema, name, depth + 1));
      }
      case "integer":
      case "number": {
        const min = Number(schema.minimum ?? schema.exclusiveMinimum ?? 1);
        const max = Number(schema.maximum ?? min + 100);
        const value = Math.min(
          max,
          Math.max(min, Math.round(min + this.random() * Math.min(100, max - min))),
        );
        return type === "integer" ? Math.ceil(value) : value;
      }
      case "boolean":
        return this.chance(0.5);
      case "null":
        return null;
      default:
        return this.stringFor(schema, name);
    }
  }

  private stringFor(schema: Schema, name: string): string {
    if (schema.format === "date-time") return new Date(Date.UTC(2030, 0, 1)).toISOString();
    if (schema.format === "uri") return "https://example.com/";
    const min = Number(schema.minLength ?? 1);
    const candidates = ["a", "abc", name || "x", "alice", "x_1", "A1", "main", "1", "1-1"];
    const pattern = typeof schema.pattern === "string" ? new RegExp(schema.pattern, "u") : undefined;
    const fitting = candidates.find((c) => c.length >= min && (!pattern || pattern.test(c)));
    return fitting ?? "a".repeat(Math.max(min, 1));
  }
}

/**
 * What is wrong with an answer, or `undefined`: no 5xx, and an error's body is the catalogue's JSON.
 * `jsonRpc`: the operation speaks JSON-RPC (the MCP proxy), whose protocol errors are JSON-RPC error
 * objects (400 for a message that is not one); none may be an internal error (-32603), even in a 200.
 * `upstreamAnswers`: the causes of 5xx that are an upstream's own answer, which the operation documents.
 */
export function answerProblem(
  answer: { status: number; type: string | null; text: string },
  options: { jsonRpc?: boolean; upstreamAnswers?: readonly string[] } = {},
): string | undefined {
  const { status, type: contentType, text } = answer;
  if (status < 400 && !(options.jsonRpc && contentType?.startsWith("application/json"))) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `not JSON (${contentType}): ${text.slice(0, 200)}`;
  }
  if (!contentType?.startsWith("application/json")) return `Content-Type ${contentType}`;
  if (options.jsonRpc && isJsonRpc(body)) {
    const error = (body as { error?: { code?: unknown } }).error;
    if (error?.code === -32603) return `a JSON-RPC internal error: ${text.slice(0, 300)}`;
    return status >= 500 ? `a ${status}: ${text.slice(0, 300)}` : undefined;
  }
  if (status < 400) return undefined;
  const allowed5xx = options.upstreamAnswers ?? [];
  const problem = catalogueProblem(status, body as Record<string, unknown>);
  if (problem) return `${problem}: ${text.slice(0, 300)}`;
  if (status >= 500) {
    const code = codeOf(body as Record<string, unknown>);
    if (!code || !allowed5xx.includes(code)) return `a ${status}: ${text.slice(0, 300)}`;
  }
  return undefined;
}

/** A JSON-RPC 2.0 answer: a result, or an error with a numeric code and a message. */
const isJsonRpc = (body: unknown): boolean => {
  const message = body as {
    jsonrpc?: unknown;
    result?: unknown;
    error?: { code?: unknown; message?: unknown };
  };
  if (message === null || typeof message !== "object" || message.jsonrpc !== "2.0") return false;
  if (message.error === undefined) return "result" in message;
  return typeof message.error.code === "number" && typeof message.error.message === "string";
};

const codeOf = (body: Record<string, unknown>): string | undefined => {
  const error = body.error as Record<string, unknown> | string | undefined;
  return typeof error === "object"
    ? String(error.code)
    : typeof body.code === "string"
      ? body.code
      : undefined;
};

const statusOfCode = (code: string): number | undefined => {
  const catalogued = (ERROR_CATALOGUE as Record<string, { status: number }>)[code];
  if (catalogued) return catalogued.status;
  const under = (ERROR_CAUSES as Record<string, keyof typeof ERROR_CATALOGUE>)[code];
  return under ? ERROR_CATALOGUE[under].status : undefined;
};

/** The shapes `errorBody` gives (docs/api/errors.md): 422's `detail`, the key's 429, OpenAI's, the platform's. */
function catalogueProblem(status: number, body: Record<string, unknown>): string | undefined {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return "not a JSON object";
  if (status === 422) {
    const detail = body.detail as { loc?: unknown; msg?: unknown; type?: unknown }[] | undefined;
    if (!Array.isArray(detail) || detail.length === 0) return "a 422 without detail";
    for (const item of detail)
      if (!Array.isArray(item.loc) || typeof item.msg !== "string" || typeof item.type !== "string")
        return "a 422 detail item not of pydantic's shape";
    return undefined;
  }
  const error = body.error;
  if (typeof error === "object" && error !== null) {
    const { message, type, code } = error as Record<string, unknown>;
    if (typeof message !== "string" || typeof type !== "string")
      return "an OpenAI error without message or type";
    if (statusOfCode(String(code)) !== status)
      return `code ${String(code)} is not a ${status} of the catalogue`;
    return undefined;
  }
  if (typeof error !== "string") return "no error";
  const titled = Object.values(ERROR_CATALOGUE).find((entry) => entry.title === error);
  if (!titled || titled.status !== status) return `"${error}" is not the catalogue's title of a ${status}`;
  if (body.code !== undefined && statusOfCode(String(body.code)) !== status)
    return `code ${String(body.code)} is not a ${status} of the catalogue`;
  return undefined;
}
