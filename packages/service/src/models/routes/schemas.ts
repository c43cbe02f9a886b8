import { objectSchema, stringSchema } from "@gw/core/openapi";

export const TAG = "Models";

/** Listing models is for keys that may use them: `responses:read` or `responses:write`. */
export const MODEL_ACCESS = ["responses:read", "responses:write"] as const;

/** OpenAI's model object, as the OpenAPI document shows it. */
export const model = objectSchema({
  id: stringSchema(),
  object: { type: "string", const: "model" },
  created: { type: "integer" },
  owned_by: stringSchema(),
});
