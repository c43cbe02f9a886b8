import { type JsonSchema, objectSchema, stringSchema } from "@gw/core/openapi";
import { ID_PREFIX } from "../items/items.ts";

/**
 * JSON Schemas of answers that several features share, for the OpenAPI
 * document (a feature's own are in its `routes/schemas.ts`).
 */

export const unixTime: JsonSchema = { type: "integer", description: "Unix time, in seconds" };
export const metadata: JsonSchema = { type: "object", additionalProperties: { type: "string" } };
export const nullable = (type: string): JsonSchema => ({ type: [type, "null"] });

/** An item as OpenAI's Conversations and Responses APIs show them: a message, a function call or its output, a hosted MCP item, a file search. */
export const item: JsonSchema = {
  type: "object",
  description:
    "An item as OpenAI's Conversations API shows them: a message, a function call or its output, a hosted MCP tool's listing, call or approval, a file search",
  properties: { id: stringSchema(), type: { enum: Object.keys(ID_PREFIX) } },
  required: ["id", "type"],
};

/** OpenAI's list object of items. */
export const itemList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: item },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

/** A 204. */
export const noContent = { 204: { description: "Done; no body" } };
/** A 200 with `schema`. */
export const ok = (description: string, schema: JsonSchema) => ({ 200: { description, schema } });
