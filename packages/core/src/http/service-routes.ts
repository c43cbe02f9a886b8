import type { RouteTemplate } from "./route-labels.ts";

/**
 * The service's endpoints, which the gateway forwards: the gateway labels
 * their requests (and the ones it refuses before forwarding: 401, 403, 429)
 * with these templates. A service test checks this list against the routes
 * the service really registers.
 */
export const SERVICE_ROUTES: RouteTemplate[] = [
  ["POST", "/llm/conversations"],
  ["GET", "/llm/conversations/:id"],
  ["POST", "/llm/conversations/:id"],
  ["DELETE", "/llm/conversations/:id"],
  ["GET", "/llm/conversations/:id/items"],
  ["POST", "/llm/conversations/:id/items"],
  ["GET", "/llm/conversations/:id/items/:itemId"],
  ["DELETE", "/llm/conversations/:id/items/:itemId"],
  ["POST", "/llm/responses"],
  ["POST", "/llm/responses/input_tokens"],
  ["GET", "/llm/responses/:id"],
  ["GET", "/llm/responses/:id/input_items"],
  ["DELETE", "/llm/responses/:id"],
  ["POST", "/llm/responses/:id/cancel"],
  ["POST", "/llm/chat/completions"],
  ["GET", "/llm/chat/completions"],
  ["GET", "/llm/chat/completions/:id"],
  ["GET", "/llm/chat/completions/:id/messages"],
  ["POST", "/llm/chat/completions/:id"],
  ["DELETE", "/llm/chat/completions/:id"],
  ["GET", "/llm/models"],
  ["GET", "/llm/models/:id"],
  ["GET", "/usage"],
  ["POST", "/llm/evals/schedules"],
  ["GET", "/llm/evals/schedules"],
  ["GET", "/llm/evals/schedules/:schedule_id"],
  ["GET", "/llm/evals/schedules/:schedule_id/runs"],
  ["DELETE", "/llm/evals/schedules/:schedule_id"],
  ["PUT", "/sandbox/connections/github"],
  ["GET", "/sandbox/connections/github"],
  ["DELETE", "/sandbox/connections/github"],
  ["POST", "/sandbox/sessions"],
  ["GET", "/sandbox/sessions/:id"],
  ["DELETE", "/sandbox/sessions/:id"],
  ["POST", "/sandbox/sessions/:id/assignments"],
  ["POST", "/sandbox/sessions/:session_id/github/push"],
].map(([method, path]) => ({ method: method!, path: `/api/v1${path}` }));

/**
 * The service's endpoints that call a model. For a key with token or spend
 * budgets, the gateway leaves their request windows to the service, which
 * counts them with the tokens and spend in one step (docs/api/rate-limits.md, "Token and spend budgets").
 * Add every new endpoint that calls a model here.
 */
export const MODEL_ROUTES: RouteTemplate[] = [
  { method: "POST", path: "/api/v1/llm/responses" },
  { method: "POST", path: "/api/v1/llm/chat/completions" },
];

/** Whether `method` and `url` (path and query, as received) are a model call, as Express would route them. */
export function isModelCall(method: string, url: string): boolean {
  const path = url.split("?")[0]!.toLowerCase().replace(/\/+$/, "");
  return MODEL_ROUTES.some((r) => r.method === method && r.path === path);
}
