import { PUBLIC_USER, RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import { principalOf, requirePermission } from "@gw/core/http";
import { userIdSchema } from "@gw/core/principal";
import { parseRfc3339 } from "@gw/core/rfc3339";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { audited } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";

/** Resource ids come from the service (`conv_…`, `resp_…`) or the caller's own systems. */
export const resourceIdSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]*$/, "String should contain only printable characters without spaces");

const roleChangeShape = {
  resourceType: z.enum(RESOURCE_TYPES),
  resourceId: resourceIdSchema,
  userId: userIdSchema,
  role: z.enum(ROLES),
};

function refusePublicOwner(body: { userId: string; role: string }, ctx: z.RefinementCtx): void {
  if (body.userId === PUBLIC_USER && body.role === "owner") {
    ctx.addIssue({
      code: "custom",
      path: ["userId"],
      input: body.userId,
      message: "Value error, the public user '*' can be granted only 'writer' or 'reader', never 'owner'",
    });
  }
}

/** Body of revoke: `{resourceType, resourceId, userId, role}`. */
export const roleChangeSchema = z.strictObject(roleChangeShape).superRefine(refusePublicOwner);

/**
 * `expiresAt`: an RFC 3339 time in the future, at most `maxTtlSeconds`
 * ahead. pydantic's types: `datetime_parsing`, `datetime_future`.
 */
export function expiresAtSchema(maxTtlSeconds: number, clock: Clock = systemClock) {
  return z.string().superRefine((value, ctx) => {
    const at = parseRfc3339(value);
    if (at === undefined) {
      ctx.addIssue({
        code: "custom",
        params: { type: "datetime_parsing" },
        message: "Input should be a valid datetime (RFC 3339, e.g. 2030-01-31T12:00:00Z)",
      });
    } else if (at <= clock.wall()) {
      ctx.addIssue({
        code: "custom",
        params: { type: "datetime_future" },
        message: "Input should be in the future",
      });
    } else if (at > clock.wall() + maxTtlSeconds * 1000) {
      ctx.addIssue({
        code: "custom",
        message: `Value error, a grant may expire at most ${maxTtlSeconds} seconds from now (GRANT_MAX_TTL)`,
      });
    }
  });
}

/**
 * Body of grant: revoke's, plus an optional `expiresAt` for writer and reader
 * grants; `null`, like leaving it out, is a grant that does not expire.
 */
export function grantSchema(maxTtlSeconds: number, clock: Clock = systemClock) {
  return z
    .strictObject({
      ...roleChangeShape,
      expiresAt: expiresAtSchema(maxTtlSeconds, clock).nullable().optional(),
    })
    .superRefine(refusePublicOwner)
    .superRefine((body, ctx) => {
      if (body.expiresAt && body.role === "owner") {
        ctx.addIssue({
          code: "custom",
          path: ["expiresAt"],
          input: body.expiresAt,
          message: "Value error, an owner never expires: expiresAt is only for 'writer' and 'reader'",
        });
      }
    })
    .transform(({ expiresAt, ...body }) => {
      const at = expiresAt ? parseRfc3339(expiresAt) : undefined;
      return { ...body, ...(at !== undefined ? { expiresAt: new Date(at) } : {}) };
    });
}

/**
 * Grant and revoke share their shape: `authorization:write`, the body above,
 * the change made as the principal and recorded in the audit trail, 204 with
 * no body.
 */
export function registerRoleChange(
  router: Router,
  operation: "grant" | "revoke",
  deps: AuthorizationRouteDeps,
): void {
  const schema = operation === "grant" ? grantSchema(deps.grantMaxTtlSeconds, deps.clock) : roleChangeSchema;
  router.post(
    `/authorization/llm/${operation}`,
    requirePermission("authorization:write"),
    async (req, res) => {
      const body: z.output<ReturnType<typeof grantSchema>> = validate("body", schema, req.body);
      const principal = principalOf(res);
      const change = {
        type: body.resourceType,
        id: body.resourceId,
        userId: body.userId,
        role: body.role,
        ...(body.expiresAt ? { expiresAt: body.expiresAt } : {}),
      };
      await audited(
        deps,
        { principal, requestId: req.id },
        {
          action: operation,
          resource: change,
          subject: change.userId,
          role: change.role,
          expiresAt: body.expiresAt,
        },
        () => deps.authorization[operation](principal, change),
      );
      res.status(204).end();
    },
  );
}
