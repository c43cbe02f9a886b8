import { objectSchema, stringSchema } from "@gw/core/openapi";
import { nullable, unixTime } from "../../http/schemas.ts";

/** OpenAI's chat completion object, as the OpenAPI document shows it. */
export const completion = objectSchema(
  {
    id: stringSchema("`chatcmpl-…`"),
    object: { type: "string", const: "chat.completion" },
    created: unixTime,
    model: stringSchema(),
    choices: { type: "array", items: { type: "object" } },
    usage: objectSchema(
      {
        prompt_tokens: { type: "integer" },
        completion_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
      },
      { open: true },
    ),
  },
  { open: true, description: "OpenAI's chat completion object; a stored one also carries `metadata`" },
);

export const completionList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: completion },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

export const messageList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: { type: "object", description: "`{id, role, content, …}`" } },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});
