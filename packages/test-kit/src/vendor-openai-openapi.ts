/**
 * Writes the test fixture `test/fixtures/openai-openapi.json`: the schemas of
 * OpenAI's official OpenAPI document (github.com/openai/openai-openapi,
 * `openapi.json`) that describe what this gateway speaks (Responses and
 * their events, Conversations and items, Chat Completions and chunks, stored
 * completions, Models, input tokens, Files, Vector stores, Embeddings) and every schema they refer to, with
 * the document's version and the commit it came from.
 *
 * `pnpm exec node packages/test-kit/src/vendor-openai-openapi.ts <openapi.json> <commit> <date>`
 */
import { readFileSync, writeFileSync } from "node:fs";

/** The schemas the gateway's objects, events and request bodies are checked against. */
export const VENDORED_ROOTS = [
  "CreateResponse",
  "Response",
  "ResponseStreamEvent",
  "ResponseItemList",
  "TokenCountsBody",
  "TokenCountsResource",
  "CreateConversationBody",
  "UpdateConversationBody",
  "ConversationResource",
  "ConversationItem",
  "ConversationItemList",
  "DeletedConversationResource",
  "CreateChatCompletionRequest",
  "CreateChatCompletionResponse",
  "CreateChatCompletionStreamResponse",
  "ChatCompletionList",
  "ChatCompletionMessageList",
  "ChatCompletionDeleted",
  "Model",
  "ListModelsResponse",
  "CreateEmbeddingRequest",
  "CreateEmbeddingResponse",
  "ErrorResponse",
  "CreateFileRequest",
  "OpenAIFile",
  "ListFilesResponse",
  "DeleteFileResponse",
  "CreateVectorStoreRequest",
  "UpdateVectorStoreRequest",
  "VectorStoreObject",
  "ListVectorStoresResponse",
  "DeleteVectorStoreResponse",
  "CreateVectorStoreFileRequest",
  "UpdateVectorStoreFileAttributesRequest",
  "VectorStoreFileObject",
  "ListVectorStoreFilesResponse",
  "DeleteVectorStoreFileResponse",
  "CreateVectorStoreFileBatchRequest",
  "VectorStoreFileBatchObject",
] as const;

type Json = Record<string, unknown>;

/** `roots` and every schema they refer to, in the document's order. */
export function schemaClosure(schemas: Record<string, Json>, roots: readonly string[]): Record<string, Json> {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    if (!schemas[name]) throw new Error(`No schema ${name} in the document`);
    seen.add(name);
    walk(schemas[name]);
  };
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) for (const v of value) walk(v);
    else if (value && typeof value === "object")
      for (const [key, v] of Object.entries(value)) {
        if (key === "$ref" && typeof v === "string") visit(v.split("/").at(-1)!);
        else if (!key.startsWith("x-")) walk(v);
      }
  };
  for (const root of roots) visit(root);
  return Object.fromEntries(Object.entries(schemas).filter(([name]) => seen.has(name)));
}

if (import.meta.main) {
  const [path, commit, date] = process.argv.slice(2);
  if (!path || !commit || !date) {
    process.stderr.write("usage: vendor-openai-openapi.ts <openapi.json> <commit> <date>\n");
    process.exit(2);
  }
  const document = JSON.parse(readFileSync(path, "utf8")) as {
    openapi: string;
    info: { title: string; version: string };
    components: { schemas: Record<string, Json> };
  };
  const schemas = schemaClosure(document.components.schemas, VENDORED_ROOTS);
  // One schema a line: a new version's diff shows which schemas changed.
  const lines = Object.entries(schemas).map(
    ([name, schema]) => `${JSON.stringify(name)}:${JSON.stringify(schema)}`,
  );
  const head = {
    openapi: document.openapi,
    info: { title: document.info.title, version: document.info.version },
    "x-source": {
      repository: "https://github.com/openai/openai-openapi",
      file: "openapi.json",
      commit,
      date,
    },
    "x-roots": VENDORED_ROOTS,
  };
  const text = `${JSON.stringify(head).slice(0, -1)},"components":{"schemas":{\n${lines.join(",\n")}\n}}}\n`;
  JSON.parse(text);
  writeFileSync(new URL("../test/fixtures/openai-openapi.json", import.meta.url), text);
  process.stdout.write(`${Object.keys(schemas).length} schemas of OpenAI API ${document.info.version}\n`);
}
