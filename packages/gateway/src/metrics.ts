import { WINDOWS } from "@gw/core/limits";
import { UPSTREAM_LIMITS } from "@gw/core/mcp";
import { createMetrics, LATENCY_BUCKETS } from "@gw/core/metrics";
import { Counter, Gauge, Histogram } from "prom-client";

export const AUTHORIZATION_OPERATIONS = [
  "check",
  "grant",
  "revoke",
  "register",
  "delete",
  "lookup",
  "grants",
  "audit",
  "inspect",
] as const;
export type AuthorizationOperation = (typeof AUTHORIZATION_OPERATIONS)[number];

// Every value each closed label takes, so every series exists (at 0) before it first happens.
const AUTHENTICATION_OUTCOMES = [
  "ok",
  "ok_token",
  "missing",
  "ambiguous",
  "malformed",
  "unknown",
  "revoked",
  "expired",
  "invalid_token",
  "store_unavailable",
];
const JWT_OUTCOMES = [
  "ok",
  "unknown_api_key",
  "revoked_authorization",
  "expired",
  "audience",
  "not_yet_valid",
  "claims",
  "algorithm",
  "unknown_key",
  "signature",
  "malformed",
];
const TOKEN_EXCHANGE_OUTCOMES = ["issued", "forbidden", "invalid"];
export const CONSOLE_SIGN_IN_OUTCOMES = [
  "signed_in",
  "invalid_key",
  "missing_permission",
  "limited_address",
  "limited_organization",
] as const;
export type ConsoleSignInOutcome = (typeof CONSOLE_SIGN_IN_OUTCOMES)[number];
export const MCP_CALL_OUTCOMES = ["ok", "tool_error", "denied", "upstream_error"] as const;
export type McpCallOutcome = (typeof MCP_CALL_OUTCOMES)[number];
export const OAUTH_GRANT_TYPES = ["authorization_code", "refresh_token"] as const;
/**
 * Why the token endpoint refused: the OAuth `error` it answered, except a used
 * refresh token presented again (`refresh_token_reused`, which revoked its
 * authorization) and a failure of the gateway itself (`server_error`).
 */
export const OAUTH_TOKEN_REFUSALS = [
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "refresh_token_reused",
  "unsupported_grant_type",
  "invalid_target",
  "temporarily_unavailable",
  "server_error",
] as const;
export type OAuthTokenRefusal = (typeof OAUTH_TOKEN_REFUSALS)[number];
/** How a client became known: registered (RFC 7591), or its metadata document fetched; and whether it was. */
export const OAUTH_REGISTRATIONS = {
  dynamic: ["accepted", "refused", "limited"],
  metadata_document: ["accepted", "refused"],
} as const;
export type OAuthRegistrationKind = keyof typeof OAUTH_REGISTRATIONS;
/** Where a rate-limit decision was made, by outcome: `local` is a refusal remembered in process. */
const RATE_LIMIT_STORES = { allowed: ["redis", "memory"], rejected: ["redis", "memory", "local"] };

/** The gateway's metrics: the shared HTTP ones plus its own decisions. */
export function createGatewayMetrics() {
  const base = createMetrics("gateway");
  const authentications = new Counter({
    name: "gateway_authentications_total",
    help: "Credentials presented, by outcome (ok, missing, malformed, unknown, expired, revoked).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const tokenExchanges = new Counter({
    name: "gateway_token_exchanges_total",
    help: "API-key-for-token exchanges, by outcome (issued, forbidden, invalid).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const jwtVerifications = new Counter({
    name: "gateway_jwt_verifications_total",
    help: "Gateway tokens presented as credentials, by outcome (ok, expired, signature, audience, revoked_authorization, ...).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const rateLimitDecisions = new Counter({
    name: "gateway_rate_limit_decisions_total",
    help: "Rate-limit decisions: allowed (one per window checked) or rejected (by the refusing window), by store.",
    labelNames: ["outcome", "window", "store"] as const,
    registers: [base.registry],
  });
  const rateLimitStoreErrors = new Counter({
    name: "gateway_rate_limit_store_errors_total",
    help: "Rate-limit decisions that failed in Redis.",
    registers: [base.registry],
  });
  const rateLimitFallbacks = new Counter({
    name: "gateway_rate_limit_fallbacks_total",
    help: "Decisions made without Redis: by the in-memory insurance limiter (open) or refused with 503 (closed).",
    labelNames: ["mode"] as const,
    registers: [base.registry],
  });
  const rateLimitDecisionSeconds = new Histogram({
    name: "gateway_rate_limit_decision_seconds",
    help: "Time to decide one request's quotas.",
    buckets: LATENCY_BUCKETS,
    registers: [base.registry],
  });
  const authorizationOperations = new Counter({
    name: "gateway_authorization_operations_total",
    help: "Authorization operations (check, grant, revoke, register, delete, lookup, grants, audit), by outcome (allowed, denied, conflict, invalid, error).",
    labelNames: ["operation", "outcome"] as const,
    registers: [base.registry],
  });
  const zero = <L extends string>(counter: Counter<L>, values: readonly string[], label: L) => {
    for (const value of values) counter.inc({ [label]: value } as Partial<Record<L, string>>, 0);
  };
  zero(authentications, AUTHENTICATION_OUTCOMES, "outcome");
  zero(jwtVerifications, JWT_OUTCOMES, "outcome");
  zero(tokenExchanges, TOKEN_EXCHANGE_OUTCOMES, "outcome");
  zero(rateLimitFallbacks, ["open", "closed"], "mode");
  for (const [outcome, stores] of Object.entries(RATE_LIMIT_STORES)) {
    for (const store of stores) {
      for (const window of WINDOWS) rateLimitDecisions.inc({ outcome, window, store }, 0);
    }
  }
  for (const operation of AUTHORIZATION_OPERATIONS) {
    for (const outcome of ["allowed", "denied", "conflict", "invalid", "error"]) {
      authorizationOperations.inc({ operation, outcome }, 0);
    }
  }
  const auditWriteErrors = new Counter({
    name: "gateway_audit_write_errors_total",
    help: "Audit records PostgreSQL could not keep (the change was refused) or whose outcome it could not record (the record stays 'unknown'; logged).",
    registers: [base.registry],
  });
  const mcpToolCalls = new Counter({
    name: "gateway_mcp_tool_calls_total",
    help: "MCP tools/call through the proxy, by outcome (ok, tool_error: the tool answered isError, denied, upstream_error).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  zero(mcpToolCalls, MCP_CALL_OUTCOMES, "outcome");
  const consoleSignIns = new Counter({
    name: "gateway_console_sign_ins_total",
    help: "Admin console sign-ins, by outcome (signed_in, invalid_key: unknown, revoked or expired, missing_permission, limited_address and limited_organization: refused with 429 for too many failed attempts).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  zero(consoleSignIns, CONSOLE_SIGN_IN_OUTCOMES, "outcome");
  const mcpToolCallSeconds = new Histogram({
    name: "gateway_mcp_tool_call_seconds",
    help: "Time of an allowed MCP tools/call through the proxy, upstream included, by outcome.",
    labelNames: ["outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [base.registry],
  });
  const mcpUpstreamLimits = new Counter({
    name: "gateway_mcp_upstream_limits_total",
    help: "Upstream MCP answers and tools refused by a limit: answer_bytes (an answer cut), tools_per_server (a listing refused, or a new tool not registered), tool_name (a tool name refused), new_tools_per_listing (a new tool left for a later listing).",
    labelNames: ["limit"] as const,
    registers: [base.registry],
  });
  zero(mcpUpstreamLimits, UPSTREAM_LIMITS, "limit");
  const oauthTokensIssued = new Counter({
    name: "gateway_oauth_tokens_issued_total",
    help: "Tokens the MCP authorization server issued (an access and a refresh token each), by grant_type (authorization_code, refresh_token).",
    labelNames: ["grant_type"] as const,
    registers: [base.registry],
  });
  zero(oauthTokensIssued, OAUTH_GRANT_TYPES, "grant_type");
  const oauthTokenRefusals = new Counter({
    name: "gateway_oauth_token_refusals_total",
    help: "Token requests the MCP authorization server refused, by reason (the OAuth error answered; refresh_token_reused: a used refresh token presented again, its authorization revoked; server_error).",
    labelNames: ["reason"] as const,
    registers: [base.registry],
  });
  zero(oauthTokenRefusals, OAUTH_TOKEN_REFUSALS, "reason");
  const oauthRegistrations = new Counter({
    name: "gateway_oauth_registrations_total",
    help: "MCP clients made known to the authorization server, by kind (dynamic: RFC 7591 registration; metadata_document: a Client ID Metadata Document fetched) and outcome (accepted, refused, limited).",
    labelNames: ["kind", "outcome"] as const,
    registers: [base.registry],
  });
  for (const [kind, outcomes] of Object.entries(OAUTH_REGISTRATIONS))
    for (const outcome of outcomes) oauthRegistrations.inc({ kind, outcome }, 0);
  /** Read at each scrape: whether this gateway answers MCP servers' tokens from memory now. */
  let leaseHeld: () => boolean = () => false;
  new Gauge({
    name: "gateway_mcp_token_lease_held",
    help: "1 while this gateway holds its lease on MCP servers' ZedTokens and answers them from memory (MCP_TOKEN_LEASE_MS); 0 when every proxied call reads Redis (the lease off or lapsed, its subscription lost, Redis Cluster).",
    registers: [base.registry],
    collect() {
      this.set(leaseHeld() ? 1 : 0);
    },
  });
  return {
    /** Where `gateway_mcp_token_lease_held` reads the lease from. */
    watchLease(held: () => boolean) {
      leaseHeld = held;
    },
    ...base,
    consoleSignIns,
    mcpToolCalls,
    mcpUpstreamLimits,
    mcpToolCallSeconds,
    oauthTokensIssued,
    oauthTokenRefusals,
    oauthRegistrations,
    authorizationOperations,
    auditWriteErrors,
    authentications,
    tokenExchanges,
    jwtVerifications,
    rateLimitDecisions,
    rateLimitStoreErrors,
    rateLimitFallbacks,
    rateLimitDecisionSeconds,
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
