import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConnectionStatus, ConnectionStore } from "../../sandbox/connections.ts";

export type { ConnectionStatus };

/** `GET /api/v1/sandbox/connections/github` → `{connected, updated_at}`; never the token. */
export function registerGetConnection(router: Router, connections: ConnectionStore): void {
  router.get("/sandbox/connections/github", requirePermission("sandbox:read"), async (_req, res) => {
    res.json(await connections.status(principalOf(res)));
  });
}
