import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { type SandboxRouteDeps, session, TAG } from "./schemas.ts";

/**
 * `POST /api/v1/sandbox/sessions/{id}/assignments` → the session with its
 * `assignment_generation` incremented (the first assignment is 1); pushes
 * made for an earlier generation are refused from then on.
 */
export const startAssignment = defineRoute({
  method: "POST",
  path: "/api/v1/sandbox/sessions/:id/assignments",
  operationId: "startSandboxAssignment",
  summary: "Start a new assignment: pushes of earlier generations are refused from then on",
  tag: TAG,
  permission: "sandbox:write",
  responses: ok("The session with its `assignment_generation` incremented", session),
  errors: ["not_found"],
  handler: ({ principal, params }, deps: SandboxRouteDeps) =>
    deps.sandbox.sessions.nextAssignment(principal, params.id!),
});
