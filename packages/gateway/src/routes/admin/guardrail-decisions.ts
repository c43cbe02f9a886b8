import type { AuditLog } from "@gw/core/audit";
import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { dateTimeSchema } from "@gw/core/rfc3339";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import type { GatewayMetrics } from "../../metrics.ts";
import { TAG } from "./schemas.ts";

const ACTIONS = ["block", "redact", "flag"] as const;

const decisionsQuery = z.strictObject({
  since: dateTimeSchema().optional(),
  until: dateTimeSchema().optional(),
});

const decisionCounts = objectSchema({
  object: { type: "string", const: "list" },
  data: {
    type: "array",
    items: objectSchema({
      guardrail_id: { type: "string" },
      block: { type: "integer" },
      redact: { type: "integer" },
      flag: { type: "integer" },
    }),
  },
});

/**
 * `GET /api/v1/admin/audit/guardrail-decisions?since&until` (`admin:api-keys`
 * or `admin:console`): the organization's guardrail decisions counted per
 * guardrail and action from its audit trail (the console's usage page shows
 * the blocks). Counted from the trail, so it covers what the trail keeps.
 */
export const guardrailDecisionCounts = defineRoute({
  method: "GET",
  path: "/api/v1/admin/audit/guardrail-decisions",
  operationId: "guardrailDecisionCounts",
  summary: "The organization's guardrail decisions per guardrail and action, from its audit trail",
  tag: TAG,
  permission: ["admin:api-keys", "admin:console"],
  query: decisionsQuery,
  responses: { 200: { description: "Decisions per guardrail, by guardrail id", schema: decisionCounts } },
  handler: async (
    { principal, query },
    deps: { audit: AuditLog; metrics: Pick<GatewayMetrics, "authorizationOperations"> },
  ) => {
    const counted = await measured(deps.metrics, "audit", () =>
      deps.audit.guardrailDecisions(principal.org, {
        since: query.since ? new Date(query.since) : undefined,
        until: query.until ? new Date(query.until) : undefined,
      }),
    );
    const byGuardrail = new Map<string, Record<(typeof ACTIONS)[number], number>>();
    for (const { guardrail, action, count } of counted) {
      const row = byGuardrail.get(guardrail) ?? { block: 0, redact: 0, flag: 0 };
      if ((ACTIONS as readonly string[]).includes(action)) row[action as (typeof ACTIONS)[number]] += count;
      byGuardrail.set(guardrail, row);
    }
    return {
      object: "list",
      data: [...byGuardrail].map(([guardrail_id, counts]) => ({ guardrail_id, ...counts })),
    };
  },
});
