import { PUBLIC_USER, RESOURCE_TYPES, ROLES } from "@gw/core";
import { z } from "zod";

/** Resource ids come from the service (`conv_…`, `resp_…`) or the caller's own systems. */
export const resourceIdSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]*$/, "String should contain only printable characters without spaces");

/** Body of grant and revoke: `{resourceType, resourceId, userId, role}`. */
export const roleChangeSchema = z
  .strictObject({
    resourceType: z.enum(RESOURCE_TYPES),
    resourceId: resourceIdSchema,
    userId: z
      .string()
      .min(1)
      .max(256)
      .regex(/^[\x20-\x7e]*$/, "String should contain only printable characters"),
    role: z.enum(ROLES),
  })
  .superRefine((body, ctx) => {
    if (body.userId === PUBLIC_USER && body.role === "owner") {
      ctx.addIssue({
        code: "custom",
        path: ["userId"],
        input: body.userId,
        message: "Value error, the public user '*' can be granted only 'writer' or 'reader', never 'owner'",
      });
    }
  });
