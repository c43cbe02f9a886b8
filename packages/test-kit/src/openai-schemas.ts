/**
 * OpenAI's official schemas (the vendored `test/fixtures/openai-openapi.json`,
 * see `vendor-openai-openapi.ts`) as validators: what the gateway answers and
 * streams is checked against them, and `pnpm check:config` checks the
 * documentation's table of request fields against their request bodies.
 */
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";

type Json = Record<string, unknown>;

interface VendoredDocument {
  info: { title: string; version: string };
  "x-source": { repository: string; file: string; commit: string; date: string };
  components: { schemas: Record<string, Json> };
}

const document = JSON.parse(
  readFileSync(new URL("../test/fixtures/openai-openapi.json", import.meta.url), "utf8"),
) as VendoredDocument;

/** The OpenAI API version the schemas are of, and where they came from. */
export const OPENAI_OPENAPI = { version: document.info.version, source: document["x-source"] };

/**
 * OpenAPI's dialect as JSON Schema 2020-12: `nullable: true` (which the
 * document still uses) admits `null`; `oneOf` is read as `anyOf`, as OpenAI's
 * own SDKs read their unions (options that overlap, like two text parts that
 * differ only in optional fields, are not an error there either).
 */
function asJsonSchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(asJsonSchema);
  if (!value || typeof value !== "object") return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === "nullable" || key === "discriminator" || key.startsWith("x-")) continue;
    out[key === "oneOf" ? "anyOf" : key] = key === "properties" ? mapValues(v as Json) : asJsonSchema(v);
  }
  return (value as Json).nullable === true ? { anyOf: [out, { type: "null" }] } : out;
}

const mapValues = (o: Json) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, asJsonSchema(v)]));

let ajv: Ajv2020 | undefined;
const compiled = new Map<string, ValidateFunction>();

function validator(name: string): ValidateFunction {
  let fn = compiled.get(name);
  if (fn) return fn;
  ajv ??= (() => {
    const a = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
    a.addSchema({ $id: "openai", components: { schemas: mapValues(document.components.schemas) } });
    return a;
  })();
  fn = ajv.getSchema(`openai#/components/schemas/${name}`);
  if (!fn) throw new Error(`No schema ${name} in the vendored OpenAI document`);
  compiled.set(name, fn);
  return fn;
}

/**
 * The option of a union of typed objects (`ResponseStreamEvent`,
 * `ConversationItem`, …) that `type` names, so a problem is reported against
 * the one schema it concerns rather than against every option.
 */
function optionFor(schema: string, type: unknown): string | undefined {
  if (typeof type !== "string") return undefined;
  const union = document.components.schemas[schema];
  const options = ((union?.anyOf ?? union?.oneOf) as Json[] | undefined) ?? [];
  for (const option of options) {
    if (typeof option.$ref !== "string") continue;
    const name = option.$ref.split("/").at(-1)!;
    const typeSchema = (document.components.schemas[name]?.properties as Json | undefined)?.type as
      | Json
      | undefined;
    if (typeSchema?.const === type || (typeSchema?.enum as unknown[] | undefined)?.includes(type))
      return name;
  }
  return undefined;
}

/** Why `value` is not a valid `schema` of OpenAI's API (`[]` when it is). */
export function openaiSchemaProblems(schema: string, value: unknown): string[] {
  const option = optionFor(schema, (value as { type?: unknown } | null)?.type);
  if (option) return openaiSchemaProblems(option, value);
  const fn = validator(schema);
  if (fn(value)) return [];
  return (fn.errors ?? []).map(
    (e: ErrorObject) => `${schema}${e.instancePath || ""} ${e.message ?? ""} ${JSON.stringify(e.params)}`,
  );
}

/** The top-level fields of one of OpenAI's request bodies (through its `allOf`s and references). */
export function openaiRequestFields(schema: string): string[] {
  const schemas = document.components.schemas;
  const fields = new Set<string>();
  const visit = (s: Json | undefined): void => {
    if (!s) return;
    if (typeof s.$ref === "string") {
      visit(schemas[s.$ref.split("/").at(-1)!]);
      return;
    }
    for (const key of Object.keys((s.properties as Json | undefined) ?? {})) fields.add(key);
    for (const part of (s.allOf as Json[] | undefined) ?? []) visit(part);
  };
  visit(schemas[schema]);
  return [...fields];
}
