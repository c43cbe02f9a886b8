import { forbidden } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import type { RequestHandler } from "express";

/** Listing models is for keys that may use them: `responses:read` or `responses:write`. */
export const requireModelAccess: RequestHandler = (_req, res, next) => {
  const { permissions } = principalOf(res);
  if (!permissions.includes("responses:read") && !permissions.includes("responses:write"))
    throw forbidden("This credential lacks the 'responses:read' or 'responses:write' permission");
  next();
};
