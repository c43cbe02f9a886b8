/**
 * `docs/api/openai-fields.md` has one table of every request field of
 * OpenAI's Responses and Chat Completions APIs and what the gateway does
 * with each. Checked against OpenAI's official OpenAPI document (vendored in
 * the test kit) and the gateway's own request schemas, so a field OpenAI
 * adds is never silently unknown: it is missing from the table until someone
 * decides what the gateway does with it.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { jsonSchemaOf } from "@gw/core/openapi";
import { FIELDS_NOT_TAKEN, SERVICE_OPERATIONS } from "@gw/service";
import { OPENAI_OPENAPI, openaiRequestFields } from "@gw/test-kit/openai-schemas";
import type { z } from "zod";

export const OPENAI_FIELDS_DOC = "docs/api/openai-fields.md";

/** The two request bodies the table covers: the table's column, OpenAI's schema, the gateway's operation. */
export const OPENAI_BODIES = [
  { column: 1, api: "Responses", schema: "CreateResponse", operationId: "createResponse" },
  {
    column: 2,
    api: "Chat Completions",
    schema: "CreateChatCompletionRequest",
    operationId: "createChatCompletion",
  },
] as const;

/**
 * Fields the `openai` npm package (7.57) sends that the vendored document
 * does not list yet: the table and the gateway's schema may have them too.
 */
export const NEWER_THAN_DOCUMENT: Record<string, string[]> = { CreateResponse: ["access_programs", "image"] };

/** What a cell may say the gateway does, as its first word; `—` where the API has no such field. */
export const OUTCOMES = ["honoured", "forwarded", "enforced", "accepted", "refused"] as const;
const ABSENT = "—";

/** The table's rows: field name → its cells (Responses, Chat Completions). */
export function fieldTable(markdown: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of markdown.split("\n")) {
    const m = /^\|\s*`([a-z_]+)`(?: †)?\s*\|(.*)\|\s*$/.exec(line);
    if (!m) continue;
    rows.set(
      m[1]!,
      m[2]!.split("|").map((cell) => cell.trim()),
    );
  }
  return rows;
}

/** The gateway's fields of a request body, each with whether it is refused (documented as not supported). */
function gatewayFields(operationId: string): Map<string, { refused: boolean }> {
  const body = SERVICE_OPERATIONS.find((op) => op.operationId === operationId)?.body;
  if (!body) throw new Error(`No operation ${operationId} with a body`);
  const json = jsonSchemaOf(body as z.ZodType) as { properties?: Record<string, { description?: string }> };
  return new Map(
    Object.entries(json.properties ?? {}).map(([name, schema]) => [
      name,
      { refused: /is not supported by this service$/.test(schema.description ?? "") },
    ]),
  );
}

/** Problems with `markdown` (the document's text) as the table of every OpenAI request field. */
export function openaiFieldProblems(
  markdown: string,
  official: (schema: string) => string[] = openaiRequestFields,
): string[] {
  const doc = OPENAI_FIELDS_DOC;
  const problems: string[] = [];
  const table = fieldTable(markdown);
  if (!markdown.includes(`OpenAI API ${OPENAI_OPENAPI.version}`))
    problems.push(
      `${doc}: should say which version of OpenAI's API it covers (OpenAI API ${OPENAI_OPENAPI.version})`,
    );
  const known = new Set<string>();
  for (const { column, api, schema, operationId } of OPENAI_BODIES) {
    const fields = new Set([...official(schema), ...(NEWER_THAN_DOCUMENT[schema] ?? [])]);
    const gateway = gatewayFields(operationId);
    for (const field of fields) {
      known.add(field);
      const cell = table.get(field)?.[column - 1];
      if (cell === undefined) {
        problems.push(`${doc}: OpenAI's ${api} field \`${field}\` is not in the table`);
        continue;
      }
      const outcome = OUTCOMES.find((o) => cell.startsWith(o));
      if (!outcome) {
        problems.push(
          `${doc}: \`${field}\` (${api}) should start with one of ${OUTCOMES.join(", ")}: "${cell}"`,
        );
        continue;
      }
      const ours = gateway.get(field);
      if (!ours)
        problems.push(
          `${doc}: \`${field}\` (${api}) is ${outcome} in the table but unknown to the gateway's schema`,
        );
      else if (ours.refused !== (outcome === "refused"))
        problems.push(
          `${doc}: \`${field}\` (${api}) is ${outcome} in the table but ${ours.refused ? "refused" : "taken"} by the gateway's schema`,
        );
    }
    // A field of the other API that clients send here by habit may be refused by name: the table says so.
    const refusedByHabit = (field: string) =>
      gateway.get(field)?.refused === true && table.get(field)?.[column - 1]?.startsWith("refused") === true;
    for (const field of gateway.keys())
      if (!fields.has(field) && !refusedByHabit(field))
        problems.push(`${doc}: the gateway takes \`${field}\` (${api}), which OpenAI's ${schema} has not`);
    for (const [field, cells] of table)
      if (!fields.has(field) && cells[column - 1] !== ABSENT && !refusedByHabit(field))
        problems.push(
          `${doc}: \`${field}\` is not a field of OpenAI's ${api} request: its cell should be ${ABSENT}`,
        );
  }
  for (const field of table.keys())
    if (!known.has(field)) problems.push(`${doc}: \`${field}\` is no field of OpenAI's`);
  problems.push(...providerKindProblems(table));
  return problems;
}

/** What a Chat Completions cell says of a field an Anthropic deployment cannot take. */
export const NOT_ON_ANTHROPIC = "not on an Anthropic deployment";

/**
 * The Chat Completions cells say "not on an Anthropic deployment" of exactly
 * the fields the service never sends to one (`FIELDS_NOT_TAKEN`, llm/fields.ts).
 */
function providerKindProblems(table: Map<string, string[]>, notTaken = FIELDS_NOT_TAKEN.anthropic): string[] {
  const doc = OPENAI_FIELDS_DOC;
  const problems: string[] = [];
  for (const [field, cells] of table) {
    const says = cells[1]?.includes(NOT_ON_ANTHROPIC) === true;
    const taken = !(notTaken as readonly string[]).includes(field);
    if (says && taken)
      problems.push(
        `${doc}: \`${field}\` (Chat Completions) says "${NOT_ON_ANTHROPIC}", but Anthropic deployments take it`,
      );
    if (!says && !taken)
      problems.push(
        `${doc}: \`${field}\` (Chat Completions) should say "${NOT_ON_ANTHROPIC}": they cannot take it`,
      );
  }
  return problems;
}

export async function openaiFieldDocProblems(root: string): Promise<string[]> {
  return openaiFieldProblems(await readFile(resolve(root, OPENAI_FIELDS_DOC), "utf8"));
}
