import { PUBLIC_USER, RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import { defineRoute } from "@gw/core/http";
import { userIdSchema } from "@gw/core/principal";
import { dateTimeSchema } from "@gw/core/rfc3339";
import { z } from "zod";
import { audited } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";

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
  return dateTimeSchema({
    future: clock,
    within: (at) =>
      at > clock.wall() + maxTtlSeconds * 1000
        ? `Value error, a grant may expire at most ${maxTtlSeconds} seconds from now (GRANT_MAX_TTL)`
        : undefined,
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
    .transform(({ expiresAt, ...body }) => ({
      ...body,
      ...(expiresAt ? { expiresAt: new Date(expiresAt) } : {}),
    }));
}

/** An expiry bound for the document only: the route's bound is `GRANT_MAX_TTL`, a setting. */
const DOCUMENTED_GRANT_MAX_TTL_SECONDS = 365 * 86_400;

const noContent = { 204: { description: "Done; no body" } };

/**
 * Grant and revoke share their shape: `authorization:write`, the body above,
 * the change made as the principal and recorded in the audit trail, 204 with
 * no body.
 */
function roleChange(
  operation: "grant" | "revoke",
  doc: { operationId: string; summary: string; description: string },
) {
  return defineRoute({
    method: "POST",
    path: `/api/v1/authorization/llm/${operation}`,
    ...doc,
    tag: TAG,
    permission: "authorization:write",
    body: operation === "grant" ? grantSchema(DOCUMENTED_GRANT_MAX_TTL_SECONDS) : roleChangeSchema,
    bodyValidation: {
      schemaFor: (deps: AuthorizationRouteDeps) =>
        operation === "grant" ? grantSchema(deps.grantMaxTtlSeconds, deps.clock) : roleChangeSchema,
    },
    responses: noContent,
    errors: ["conflict"],
    handler: async ({ principal, body: parsed, req, res }, deps: AuthorizationRouteDeps) => {
      const body = parsed as z.output<ReturnType<typeof grantSchema>>;
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
  });
}

/**
 * `POST /api/v1/authorization/llm/grant` → 204. Only an owner of the resource
 * may grant; the user ends up with exactly this one role.
 */
export const grant = roleChange("grant", {
  operationId: "grant",
  summary: "Grant a user a role on a resource",
  description:
    "Only an owner of the resource may grant (403 otherwise, for a resource never registered too); the user ends up with exactly this one role. `expiresAt` (RFC 3339) is for writer and reader grants, at most `GRANT_MAX_TTL` seconds ahead.",
});

/**
 * `POST /api/v1/authorization/llm/revoke` → 204, whether or not the user held
 * the role. Only an owner may revoke; the last owner cannot be removed (409).
 */
export const revoke = roleChange("revoke", {
  operationId: "revoke",
  summary: "Revoke a user's role on a resource",
  description: "Only an owner may revoke; the last owner cannot be removed (409).",
});
