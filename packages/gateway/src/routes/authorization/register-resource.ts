import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { z } from "zod";
import { audited } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
import { resourcePathSchema } from "./resource-params.ts";

export interface RegisterResourceResponse {
  resourceType: string;
  resourceId: string;
  owner: string;
}

export const registerResourceBody = z.strictObject(resourcePathSchema.shape);

/**
 * `POST /api/v1/authorization/llm/resources` `{resourceType, resourceId}` →
 * 201: the creation hook for other backends. The principal becomes the owner
 * in one write that requires no owner yet; a resource registered before is
 * 409, and so is any conversation or response id (the service issues those).
 */
export const registerResource = defineRoute({
  method: "POST",
  path: "/api/v1/authorization/llm/resources",
  operationId: "registerResource",
  summary: "Register a resource of another backend; the principal becomes its owner",
  description: "A resource registered before is 409, and so is a conversation or response id.",
  tag: TAG,
  permission: "authorization:write",
  body: registerResourceBody,
  responses: {
    201: {
      description: "Registered",
      schema: objectSchema({
        resourceType: stringSchema(),
        resourceId: stringSchema(),
        owner: stringSchema(),
      }),
    },
  },
  errors: ["conflict"],
  handler: async ({ principal, body, req, res }, deps: AuthorizationRouteDeps) => {
    const { resourceType, resourceId } = body;
    const resource = { type: resourceType, id: resourceId };
    await audited(deps, { principal, requestId: req.id }, { action: "register", resource }, () =>
      deps.authorization.register(principal, resource),
    );
    const created: RegisterResourceResponse = { resourceType, resourceId, owner: principal.user };
    res.status(201).json(created);
  },
});
