// What the access and audit pages share: the resource types and roles a grant names, and audit records as table rows.
import { fmtTime, html, session } from "./ui.js";

export const RESOURCE_TYPES = [
  "conversation",
  "response",
  "file",
  "vector_store",
  "skill",
  "completion",
  // A registered MCP server (docs/api/mcp.md): its roles are granted and revoked as any resource's.
  ...(session.mcp ? ["mcp_server"] : []),
];
export const ROLES = ["owner", "writer", "reader"];
/** Every action the trail records (core's `AUDIT_ACTIONS`, which a test holds this list to). */
export const AUDIT_ACTIONS = [
  "register",
  "delete",
  "grant",
  "revoke",
  "inspect",
  "call",
  "act_as_key_owner",
  "store",
  "first_use",
  "guardrail.create",
  "guardrail.update",
  "guardrail.delete",
  "guardrail.attach",
  "guardrail.decision",
];

/** @import { AuditRecord } from "../api-types" */

/** @param {AuditRecord[]} records */
export function auditRows(records) {
  return records.map((r) => [
    fmtTime(r.time),
    `${r.actor.userId} (${r.actor.keyId})`,
    r.action,
    // A tool call (`call`) names its tool: the server alone does not say what was done.
    r.tool ? `${r.resourceType}:${r.resourceId} tool ${r.tool}` : `${r.resourceType}:${r.resourceId}`,
    r.subject ?? "—",
    r.role ?? "—",
    html`<span class=${`badge ${r.outcome}`}>${r.outcome}</span>`,
    r.zedToken ? html`<code class="token">${r.zedToken}</code>` : "—",
  ]);
}
export const AUDIT_COLUMNS = ["When", "Who", "Action", "Resource", "Subject", "Role", "Decision", "ZedToken"];
