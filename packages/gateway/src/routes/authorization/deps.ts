import type { AuditLog } from "@gw/core/audit";
import type { ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { GatewayMetrics } from "../../metrics.ts";
import type { LookupCursors } from "./lookup-cursor.ts";

/** What the authorization routes share. */
export interface AuthorizationRouteDeps {
  authorization: ResourceAuthorization;
  audit: AuditLog;
  metrics: Pick<GatewayMetrics, "authorizationOperations" | "auditWriteErrors">;
  logger: Logger;
  /** Longest lifetime of an expiring grant, in seconds (`GRANT_MAX_TTL`). */
  grantMaxTtlSeconds: number;
  /** Signs and opens the `next_cursor` of lookups. */
  lookupCursors: LookupCursors;
  /** Its wall time bounds a grant's `expiresAt`. */
  clock: Clock;
}

export const TAG = "Resource Authorization";
