import {
  type AuditEvent,
  type AuditLog,
  type AuditOutcome,
  type AuditRecord,
  auditActor,
} from "@gw/core/audit";
import {
  AlreadyRegistered,
  LastOwner,
  NotInspector,
  NotResourceOwner,
  ServiceIssuedResource,
} from "@gw/core/authz";
import { ValidationFailed } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { AuthorizationOperation, GatewayMetrics } from "../metrics.ts";

/** How an authorization operation ended, for metrics and the audit trail. */
export function outcomeOf(err: unknown): AuditOutcome | "invalid" {
  if (err instanceof NotResourceOwner || err instanceof NotInspector) return "denied";
  if (err instanceof LastOwner || err instanceof AlreadyRegistered || err instanceof ServiceIssuedResource)
    return "conflict";
  if (err instanceof ValidationFailed) return "invalid";
  return "error";
}

/** Runs an authorization operation, counting it by outcome (a check counts its answer). */
export async function measured<T>(
  metrics: Pick<GatewayMetrics, "authorizationOperations">,
  operation: AuthorizationOperation,
  run: () => Promise<T>,
  answered: (result: T) => "allowed" | "denied" = () => "allowed",
): Promise<T> {
  try {
    const result = await run();
    metrics.authorizationOperations.inc({ operation, outcome: answered(result) });
    return result;
  } catch (err) {
    metrics.authorizationOperations.inc({ operation, outcome: outcomeOf(err) });
    throw err;
  }
}

export interface AuditDeps {
  audit: AuditLog;
  metrics: Pick<GatewayMetrics, "authorizationOperations" | "auditWriteErrors">;
  logger: Logger;
}

/**
 * Runs a role change (the write returns its ZedToken) with its audit record,
 * whether it is allowed or refused. The record is written before the change
 * runs: if PostgreSQL cannot keep it, the change is not made and the request
 * fails (503 on an outage). Its outcome is recorded after; if that fails, the
 * change stands and its record says `unknown` (logged and counted).
 */
export async function audited(
  deps: AuditDeps,
  context: { principal: Principal; requestId: string },
  event: AuditEvent,
  run: () => Promise<string | undefined>,
): Promise<void> {
  const { principal } = context;
  let begun: AuditRecord;
  try {
    begun = await deps.audit.begin({
      organization: principal.org,
      actor: auditActor(principal),
      action: event.action,
      resourceType: event.resource.type,
      resourceId: event.resource.id,
      ...(event.subject !== undefined ? { subject: event.subject } : {}),
      ...(event.role ? { role: event.role } : {}),
      ...(event.expiresAt ? { expiresAt: event.expiresAt.toISOString() } : {}),
      requestId: context.requestId,
    });
  } catch (err) {
    deps.metrics.auditWriteErrors.inc();
    deps.logger.error(
      { err: (err as Error).message, action: event.action, org: principal.org, requestId: context.requestId },
      "could not store an audit record; the change was not made",
    );
    throw err;
  }
  let outcome: AuditOutcome = "error";
  let zedToken: string | undefined;
  try {
    zedToken = await measured(deps.metrics, event.action, run);
    outcome = "allowed";
  } catch (err) {
    const failure = outcomeOf(err);
    outcome = failure === "invalid" ? "error" : failure;
    throw err;
  } finally {
    await deps.audit.settle(begun, outcome, zedToken).catch((err: unknown) => {
      deps.metrics.auditWriteErrors.inc();
      deps.logger.error(
        {
          err: (err as Error).message,
          audit: { ...begun, outcome, ...(zedToken ? { zedToken } : {}) },
        },
        "could not record the outcome of an audited change; its record stays 'unknown'",
      );
    });
  }
}
