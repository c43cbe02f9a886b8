/**
 * `pnpm openapi`: writes the OpenAPI 3.1 document of the whole API (the
 * gateway's own routes and the service's, which the gateway forwards) to
 * the gateway's `src/generated/openapi.json`, which the gateway serves at
 * `GET /api/v1/openapi.json`. The gateway cannot import the service, so the
 * document is made here and committed; `pnpm check:config` fails when the
 * committed file is not what this script writes, or when the validator
 * finds a problem in it.
 */
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import { buildOpenApiDocument, type JsonSchema } from "@gw/core/openapi";
import { REPO_ROOT } from "@gw/devstack";
import { GATEWAY_OPERATIONS } from "@gw/gateway";
import { SERVICE_OPERATIONS } from "@gw/service";
import { Ajv2020 } from "ajv/dist/2020.js";

/** Where the document is committed, from the repository's root. */
export const OPENAPI_FILE = "packages/gateway/src/generated/openapi.json";

/** The document as `pnpm openapi` writes it. */
export function openApiDocument(): JsonSchema {
  return {
    "x-generated": "Written by `pnpm openapi` from the routes' zod schemas: never edit by hand.",
    ...buildOpenApiDocument(
      {
        title: "LLM authorization gateway",
        version: "1.1.0",
        description:
          "API keys, per-resource roles on SpiceDB, per-key rate limits and short-lived tokens, in front of an LLM service (conversations, responses, evals, sandbox sessions).",
      },
      [...GATEWAY_OPERATIONS, ...SERVICE_OPERATIONS],
    ),
  };
}

export const renderOpenApiDocument = (document: JsonSchema = openApiDocument()) =>
  `${JSON.stringify(document, null, 2)}\n`;

/**
 * Problems with a document: the OpenAPI 3.1 schema (`@apidevtools/swagger-parser`,
 * which also resolves every `$ref`), then what it leaves unchecked in 3.x:
 * each JSON Schema is valid draft 2020-12, operation ids are unique.
 */
export async function openApiProblems(document: JsonSchema, file = OPENAPI_FILE): Promise<string[]> {
  const problems: string[] = [];
  try {
    await SwaggerParser.validate(structuredClone(document) as never);
  } catch (err) {
    problems.push(`${file}: ${(err as Error).message}`);
  }
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  for (const { at, schema } of schemasIn(document)) {
    if (!ajv.validateSchema(schema)) {
      problems.push(`${file}: ${at} is not a valid JSON Schema: ${ajv.errorsText(ajv.errors)}`);
    }
  }
  const seen = new Set<string>();
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, JsonSchema>)) {
    for (const [method, operation] of Object.entries(item)) {
      const id = (operation as { operationId?: string }).operationId;
      if (id === undefined) continue;
      if (seen.has(id)) problems.push(`${file}: ${method.toUpperCase()} ${path} repeats operationId ${id}`);
      seen.add(id);
    }
  }
  return problems;
}

/** Every JSON Schema of a document (parameters, bodies, responses, components), with where it is. */
function schemasIn(document: JsonSchema): { at: string; schema: JsonSchema }[] {
  const found: { at: string; schema: JsonSchema }[] = [];
  const walk = (node: unknown, at: string, schemaHere: boolean): void => {
    if (node === null || typeof node !== "object") return;
    if (schemaHere) {
      found.push({ at, schema: node as JsonSchema });
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      const inComponentSchemas = at === "/components/schemas";
      walk(value, `${at}/${key}`, key === "schema" || inComponentSchemas);
    }
  };
  walk(document, "", false);
  return found;
}

/** Problems with the committed document: not what `pnpm openapi` writes now, or not valid. */
export async function committedOpenApiProblems(root = REPO_ROOT): Promise<string[]> {
  const fresh = renderOpenApiDocument();
  const committed = await readFile(resolve(root, OPENAPI_FILE), "utf8").catch(() => undefined);
  if (committed === undefined) return [`${OPENAPI_FILE}: missing; run pnpm openapi`];
  const problems = committed === fresh ? [] : [`${OPENAPI_FILE}: out of date; run pnpm openapi`];
  let parsed: JsonSchema;
  try {
    parsed = JSON.parse(committed);
  } catch (err) {
    return [...problems, `${OPENAPI_FILE}: not JSON: ${(err as Error).message}`];
  }
  return [...problems, ...(await openApiProblems(parsed))];
}

if (import.meta.main) {
  const document = openApiDocument();
  const problems = await openApiProblems(document);
  await writeFile(resolve(REPO_ROOT, OPENAPI_FILE), renderOpenApiDocument(document));
  for (const problem of problems) process.stderr.write(`${problem}\n`);
  process.stdout.write(
    `${OPENAPI_FILE}: written${problems.length ? `, ${problems.length} problem(s)` : ""}\n`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
