import { objectSchema, stringSchema } from "@gw/core/openapi";
import { unixTime } from "../../http/schemas.ts";

export const TAG = "Responses";

/** OpenAI's response object, as the OpenAPI document shows it. */
export const response = objectSchema(
  {
    id: stringSchema("`resp_…`"),
    object: { type: "string", const: "response" },
    created_at: unixTime,
    status: { enum: ["completed", "incomplete", "failed", "in_progress", "cancelled", "queued"] },
    model: stringSchema(),
    output: {
      type: "array",
      items: {
        type: "object",
        description:
          "An output item: a `message` (role `assistant`, `content` of `output_text` parts) or a `function_call`",
        properties: { type: stringSchema() },
        required: ["type"],
      },
    },
    usage: {
      type: ["object", "null"],
      properties: {
        input_tokens: { type: "integer" },
        output_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
      },
    },
  },
  { open: true, optional: ["usage"], description: "OpenAI's response object; further fields as OpenAI's" },
);
