import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConnectionStore } from "../../sandbox/connections.ts";

/** `DELETE /api/v1/sandbox/connections/github` → 204, whether or not one was stored. */
export function registerDeleteConnection(router: Router, connections: ConnectionStore): void {
  router.delete("/sandbox/connections/github", requirePermission("sandbox:write"), async (_req, res) => {
    await connections.delete(principalOf(res));
    res.status(204).end();
  });
}
