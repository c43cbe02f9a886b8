import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { Sandbox } from "../../sandbox/sandbox.ts";
import { clientSignal } from "./client-signal.ts";

/** `DELETE /api/v1/sandbox/sessions/{id}` → `{id, object: "sandbox.session.deleted", deleted: true}`; the workspace goes too. */
export function registerDeleteSession(router: Router, sandbox: Sandbox): void {
  router.delete("/sandbox/sessions/:id", requirePermission("sandbox:write"), async (req, res) => {
    const id = String(req.params.id);
    await sandbox.deleteSession(principalOf(res), id, clientSignal(res));
    res.json({ id, object: "sandbox.session.deleted", deleted: true });
  });
}
