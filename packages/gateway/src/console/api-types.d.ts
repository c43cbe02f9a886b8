// The JSON the console's scripts read from the gateway's API, as the OpenAPI document
// (`src/generated/openapi.json`) declares it: only for `pnpm typecheck`. The scripts name these types in
// JSDoc comments (`@import`), so the browser never asks for this file and the router never serves it.

/** A list answer: the API's `{ "data": [...] }` (other fields of a page are named where a page reads them). */
export interface List<T> {
  data: T[];
}

/** Requests, tokens and spend per window (`UnitLimits`): a missing window is not limited. */
export interface UnitLimits {
  second?: number;
  minute?: number;
  hour?: number;
  day?: number;
  tokens?: { minute?: number; hour?: number; day?: number; month?: number };
  spend?: { day?: number; month?: number };
}

/** Limits as a change sends them (`PATCH`): `null` removes a window's limit. */
export interface UnitLimitsChange {
  second?: number | null;
  minute?: number | null;
  hour?: number | null;
  day?: number | null;
  tokens?: { minute?: number | null; hour?: number | null; day?: number | null; month?: number | null };
  spend?: { day?: number | null; month?: number | null };
}

/** A key's limits: its own, and those of each of its end users. */
export interface KeyLimits extends UnitLimits {
  endUser?: UnitLimits;
}

/** `GET /admin/end-user-limits`. */
export interface EndUserLimits {
  org: string;
  endUser: UnitLimits;
}

/** A key's on-behalf-of policy. */
export type OnBehalfOf = "any" | "none" | { prefixes?: string[]; users?: string[] };

/** An API key as `GET /admin/api-keys` lists it (never its secret). */
export interface ApiKey {
  id: string;
  org: string;
  owner: string;
  name: string | null;
  permissions: string[];
  limits: KeyLimits;
  models: string[] | null;
  onBehalfOf: OnBehalfOf;
  cache: "off" | "principal" | "key";
  /** `expired`: past `expiresAt`, refused until its expiry is moved. */
  status: "active" | "expired" | "revoked";
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  /** The secret's first characters, to tell keys apart. */
  start: string;
  lastUsedAt?: string | null;
}

/** `POST /admin/api-keys`: the key and its secret, shown this once. */
export interface CreatedApiKey extends ApiKey {
  key: string;
}

/** One window of `GET /admin/api-keys/{id}/usage`. */
export interface KeyUsageWindow {
  scope: string;
  unit: string;
  window: string;
  limit: number;
  used: number;
  remaining: number;
  resetsInSeconds: number;
}

/** `GET /admin/api-keys/{id}/usage`. */
export interface KeyUsage {
  id: string;
  windows: KeyUsageWindow[];
}

/** One record of `GET /admin/audit` (the fields the console shows). */
export interface AuditRecord {
  id: string;
  time: string;
  actor: { userId: string; keyId: string };
  action: string;
  resourceType: string;
  resourceId: string;
  subject?: string;
  role?: string;
  /** The tool of an MCP tool call (`call`). */
  tool?: string;
  outcome: "allowed" | "denied" | "conflict" | "error" | "unknown";
  zedToken?: string;
}

/** `GET /admin/audit`. */
export interface AuditPage extends List<AuditRecord> {
  next_cursor: string | null;
}

/** One row of `GET /admin/audit/guardrail-decisions`; `label` is the console's own (the guardrail's name and id). */
export interface GuardrailDecisionCount {
  guardrail_id: string;
  block: number;
  redact: number;
  flag: number;
  label?: string;
}

/** `GET /authorization/llm/check`. */
export interface CheckResult {
  allowed: boolean;
}

/** One role held on a resource (`GET /admin/authorization/resources/{type}/{id}/grants`); `*` is everyone. */
export interface RoleGrant {
  userId: string;
  role: string;
  expiresAt?: string;
}

/** `GET /admin/authorization/users/{userId}/resources`. */
export interface UserResources {
  userId: string;
  resourceType: string;
  data: { resourceId: string }[];
  has_more: boolean;
}

/** One check of a guardrail (`ban_words`, `prompt_injection`, …): its other fields depend on its type. */
export interface GuardrailCheck {
  type: string;
  [field: string]: unknown;
}

/** A guardrail as `GET /guardrails` lists it. */
export interface Guardrail {
  id: string;
  object: "guardrail";
  name: string;
  checks: GuardrailCheck[];
  applies_to: "input" | "output" | "both";
  action: "block" | "redact" | "flag";
  created_at: number;
}

/** What `POST /guardrails` and `PATCH /guardrails/{id}` take from the console's form. */
export interface GuardrailBody {
  name: string;
  checks: unknown;
  applies_to: string;
  action: string;
}

/** Where a guardrail applies. */
export type GuardrailAttachment =
  | { scope: "organization" }
  | { scope: "key"; key_id: string }
  | { scope: "model"; model: string };

/** `GET` and `PUT /guardrails/{id}/attachments`. */
export interface GuardrailAttachments {
  guardrail_id: string;
  attachments: GuardrailAttachment[];
}

/** One decision of `POST /guardrails/{id}/evaluate`. */
export interface GuardrailDecision {
  check: string;
  check_index: number;
  action: "block" | "redact" | "flag";
  kinds: string[];
}

/** `POST /guardrails/{id}/evaluate`. */
export interface GuardrailEvaluation {
  guardrail_id: string;
  direction: "input" | "output";
  decisions: GuardrailDecision[];
}

/** An eval schedule as `GET /llm/evals/schedules` lists it. */
export interface EvalSchedule {
  id: string;
  name: string;
  model: string;
  every_seconds?: number;
  cron?: string;
  timezone?: string;
  created_at: number;
  next_run_at: number | null;
}

/** A run of a schedule (`GET /llm/evals/schedules/{id}/runs`). */
export interface EvalRun {
  id: string;
  schedule_id: string;
  status: "queued" | "running" | "completed" | "failed";
  model: string | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  error: string | null;
  usage: { input_tokens?: number; output_tokens?: number; total_tokens?: number };
}

/** A registered MCP server (`GET /mcp/servers`). */
export interface McpServer {
  id: string;
  name: string;
  url: string;
  description: string | null;
  created_at: number;
}

/** A credential of an MCP server, never its secret (`GET /mcp/servers/{id}/credentials`). */
export interface McpCredential {
  scope: "shared" | "me";
  type: "bearer" | "header";
  name?: string;
  created_at: number;
  last_used_at: number | null;
}

/** A tool of an MCP server as its owner sees it (`GET /mcp/servers/{id}/tools`). */
export interface McpTool {
  name: string;
  description: string | null;
  read_only_hint: boolean;
  required_role: "reader" | "writer" | "owner" | null;
  disabled: boolean;
  offered: boolean;
}

/** An MCP client a user let act for them (`GET /admin/mcp-oauth/grants`). */
export interface McpOAuthGrant {
  id: string;
  userId: string;
  clientId: string;
  clientName: string | null;
  serverId: string;
  serverName: string | null;
  resource: string;
  scope: string;
  grantedAt: number;
  lastUsedAt: number | null;
}

/** Requests, tokens and cost summed over a group. */
export interface UsageTotals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cost_usd: number;
}

/**
 * One row of `GET /usage`: the group's column (`day`, `key_id`, `end_user`, `model`) beside its totals;
 * `group_by=model` rows list the deployments that served them.
 */
export interface UsageRow extends UsageTotals {
  day?: string;
  key_id?: string;
  end_user?: string;
  model?: string;
  deployments?: ({ provider: string; model: string } & UsageTotals)[];
}

/** `GET /usage`. */
export interface UsageReport {
  start: string;
  end: string;
  totals: UsageTotals;
  data: UsageRow[];
}
