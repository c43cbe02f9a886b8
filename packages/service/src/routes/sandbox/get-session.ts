import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { SessionStore } from "../../sandbox/sessions.ts";

/** `GET /api/v1/sandbox/sessions/{id}` → the session; another principal's is 404. */
export function registerGetSession(router: Router, sessions: SessionStore): void {
  router.get("/sandbox/sessions/:id", requirePermission("sandbox:read"), async (req, res) => {
    res.json(await sessions.get(principalOf(res), String(req.params.id)));
  });
}
