import {
  PUBLIC_USER,
  principalOf,
  RESOURCE_TYPES,
  type ResourceAuthorization,
  ROLES,
  requirePermission,
  userIdSchema,
  validate,
} from "@gw/core";
import type { Router } from "express";
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
    userId: userIdSchema,
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

/**
 * Grant and revoke share their shape: `authorization:write`, the body above,
 * the change made as the principal, 204 with no body.
 */
export function registerRoleChange(
  router: Router,
  operation: "grant" | "revoke",
  authorization: ResourceAuthorization,
): void {
  router.post(
    `/authorization/llm/${operation}`,
    requirePermission("authorization:write"),
    async (req, res) => {
      const body = validate("body", roleChangeSchema, req.body);
      await authorization[operation](principalOf(res), {
        type: body.resourceType,
        id: body.resourceId,
        userId: body.userId,
        role: body.role,
      });
      res.status(204).end();
    },
  );
}
