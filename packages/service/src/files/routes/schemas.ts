import { objectSchema, stringSchema } from "@gw/core/openapi";
import { nullable, unixTime } from "../../http/schemas.ts";
import { FILE_PURPOSES } from "../store.ts";

/** A file, as the OpenAPI document shows it (OpenAI's `OpenAIFile`). */
export const file = objectSchema({
  id: stringSchema("`file_…`"),
  object: { type: "string", const: "file" },
  bytes: { type: "integer", description: "Size in bytes" },
  created_at: unixTime,
  expires_at: { ...unixTime, description: "When the file is gone, in Unix seconds" },
  filename: stringSchema(),
  purpose: { enum: [...FILE_PURPOSES] },
  status: { type: "string", const: "processed" },
});

/** OpenAI's list object of files. */
export const fileList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: file },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});
