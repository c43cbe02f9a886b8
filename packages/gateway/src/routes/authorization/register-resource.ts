import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { audited } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
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
export function registerRegisterResource(router: Router, deps: AuthorizationRouteDeps): void {
  router.post("/authorization/llm/resources", requirePermission("authorization:write"), async (req, res) => {
    const { resourceType, resourceId } = validate("body", registerResourceBody, req.body);
    const principal = principalOf(res);
    const resource = { type: resourceType, id: resourceId };
    await audited(deps, { principal, requestId: req.id }, { action: "register", resource }, () =>
      deps.authorization.register(principal, resource),
    );
    const created: RegisterResourceResponse = { resourceType, resourceId, owner: principal.user };
    res.status(201).json(created);
  });
}
