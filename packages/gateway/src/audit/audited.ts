import {
  AlreadyRegistered,
  LastOwner,
  type Logger,
  NotResourceOwner,
  type Principal,
  ServiceIssuedResource,
  ValidationFailed,
} from "@gw/core";
import type { AuthorizationOperation, GatewayMetrics } from "../metrics.ts";
import type { AuditEvent, AuditLog, AuditOutcome } from "./audit-log.ts";

/** How an authorization operation ended, for metrics and the audit trail. */
export function outcomeOf(err: unknown): AuditOutcome | "invalid" {
  if (err instanceof NotResourceOwner) return "denied";
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
 * Runs a role change (the write returns its ZedToken) and records it in the
 * audit trail whether it was allowed or refused. A record Redis cannot keep
 * is logged and counted, and does not undo or fail the change.
 */
export async function audited(
  deps: AuditDeps,
  context: { principal: Principal; requestId: string },
  event: AuditEvent,
  run: () => Promise<string | undefined>,
): Promise<void> {
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
    const { principal } = context;
    await deps.audit
      .append({
        time: new Date().toISOString(),
        organization: principal.org,
        actor: { userId: principal.user, keyId: principal.keyId, credential: principal.credential },
        action: event.action,
        resourceType: event.resource.type,
        resourceId: event.resource.id,
        ...(event.subject !== undefined ? { subject: event.subject } : {}),
        ...(event.role ? { role: event.role } : {}),
        ...(event.expiresAt ? { expiresAt: event.expiresAt.toISOString() } : {}),
        outcome,
        requestId: context.requestId,
        ...(zedToken ? { zedToken } : {}),
      })
      .catch((err: unknown) => {
        deps.metrics.auditWriteErrors.inc();
        deps.logger.error(
          {
            err: (err as Error).message,
            action: event.action,
            org: principal.org,
            requestId: context.requestId,
          },
          "could not store an audit record",
        );
      });
  }
}
