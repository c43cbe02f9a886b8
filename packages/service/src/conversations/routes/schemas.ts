import { objectSchema, stringSchema } from "@gw/core/openapi";
import { metadata, unixTime } from "../../http/schemas.ts";

/** A conversation, as the OpenAPI document shows it. */
export const conversation = objectSchema({
  id: stringSchema("`conv_…`"),
  object: { type: "string", const: "conversation" },
  created_at: unixTime,
  metadata,
});
