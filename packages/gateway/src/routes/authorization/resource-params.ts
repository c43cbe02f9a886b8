import { RESOURCE_TYPES } from "@gw/core/authz";
import { queryInt } from "@gw/core/validation";
import { z } from "zod";
import { resourceIdSchema } from "./role-change.ts";

/** `{resourceType}/{resourceId}` in a path. */
export const resourcePathSchema = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  resourceId: resourceIdSchema,
});

/** `limit` (1 to `max`, default `fallback`) and an opaque `cursor` from the previous page. */
export function pageQuery(fallback: number, max: number, cursor: z.ZodString = z.string().min(1).max(4096)) {
  return {
    limit: queryInt(z.int().min(1).max(max)).default(fallback),
    cursor: cursor.optional(),
  };
}
