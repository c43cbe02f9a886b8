import { ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { ownViewOf } from "@gw/core/permissions";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { USAGE_GROUPS, type UsageStore } from "../store.ts";

const date = z.iso.date();
export const usageQuery = z.object({
  start: date,
  end: date.optional(),
  group_by: z.enum(USAGE_GROUPS).optional(),
});

const totalsSchema = objectSchema({
  requests: { type: "integer" },
  input_tokens: { type: "integer" },
  output_tokens: { type: "integer" },
  total_tokens: { type: "integer" },
  cost_usd: {
    type: "number",
    description: "Spend in US dollars, each call at the price of the deployment that served it",
  },
  cached_requests: {
    type: "integer",
    description: "Requests answered from the response cache (no provider tokens)",
  },
});

/** Longest range one query may cover. */
const MAX_DAYS = 366;

/**
 * `GET /api/v1/usage?start=YYYY-MM-DD&end=YYYY-MM-DD&group_by=model|user|end_user|key|day|paid_by`:
 * the caller's organization's requests, tokens and `cost_usd` over UTC days
 * (inclusive), totals and, with `group_by`, one row per model, end user
 * (`user` and `end_user` alike, named by the column they ask for), API key,
 * day, or payer (`paid_by`: `platform`, and `organization` for calls made
 * with the organization's own provider key).
 * An end user (without `organization:read`) gets only its own usage: its
 * totals, and its own rows by model, by key, or its one row by end user.
 */
export const getUsage = defineRoute({
  method: "GET",
  path: "/api/v1/usage",
  operationId: "getUsage",
  summary: "The organization's requests and tokens over UTC days, optionally grouped",
  tag: "Usage",
  permission: "usage:read",
  query: usageQuery,
  responses: ok(
    "Totals, and one row per group",
    objectSchema({
      object: { type: "string", const: "usage" },
      start: { type: "string", format: "date" },
      end: { type: "string", format: "date" },
      group_by: { enum: [...USAGE_GROUPS, null] },
      totals: totalsSchema,
      data: { type: "array", items: { type: "object" } },
    }),
  ),
  handler: async ({ principal, query: q }, deps: { usage: UsageStore }) => {
    const end = q.end ?? deps.usage.today();
    const days = (Date.parse(end) - Date.parse(q.start)) / 86_400_000 + 1;
    if (days < 1)
      throw new ValidationFailed([
        { loc: ["query", "end"], msg: "end should not be before start", type: "value_error", input: end },
      ]);
    if (days > MAX_DAYS) {
      throw new ValidationFailed([
        {
          loc: ["query", "end"],
          msg: `The range should cover at most ${MAX_DAYS} days`,
          type: "value_error",
          input: end,
        },
      ]);
    }
    const { totals, data } = await deps.usage.query(
      principal.org,
      q.start,
      end,
      q.group_by,
      ownViewOf(principal),
    );
    return { object: "usage", start: q.start, end, group_by: q.group_by ?? null, totals, data };
  },
});
