import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { SessionStore } from "../../sandbox/sessions.ts";

/**
 * `POST /api/v1/sandbox/sessions/{id}/assignments` → the session with its
 * `assignment_generation` incremented (the first assignment is 1); pushes
 * made for an earlier generation are refused from then on.
 */
export function registerStartAssignment(router: Router, sessions: SessionStore): void {
  router.post("/sandbox/sessions/:id/assignments", requirePermission("sandbox:write"), async (req, res) => {
    res.json(await sessions.nextAssignment(principalOf(res), String(req.params.id)));
  });
}
