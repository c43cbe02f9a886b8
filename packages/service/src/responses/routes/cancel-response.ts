import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { TAG } from "./schemas.ts";

/**
 * `POST /api/v1/llm/responses/{id}/cancel`: only background responses can be
 * cancelled, and this service runs none, so a writer gets 400; others get
 * the 404 or 403 of any response they may not change.
 */
export const cancelResponse = defineRoute({
  method: "POST",
  path: "/api/v1/llm/responses/:id/cancel",
  operationId: "cancelResponse",
  summary: "Cancel a background response: this service runs none, so a writer gets 400",
  tag: TAG,
  permission: "responses:write",
  responses: {},
  errors: ["bad_request", "not_found"],
  authorize: roleOn("response", "writer"),
  handler: (_input, _deps: { authorization: ResourceAuthorization }) => {
    throw new AppError(
      "bad_request",
      "Only background responses can be cancelled; this one has already finished",
    );
  },
});
