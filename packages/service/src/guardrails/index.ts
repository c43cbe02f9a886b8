import { AuditLog } from "@gw/core/audit";
import type { ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Postgres } from "@gw/core/postgres";
import type { RedisClient } from "@gw/core/redis";
import type { Ids } from "../ids.ts";
import { Guardrails, RedisKeyRecords } from "./guardrails.ts";
import { GuardrailResolver, guardrailsChanged, type ResolverHooks } from "./resolve.ts";
import { GuardrailStore } from "./store.ts";

export { Guardrails } from "./guardrails.ts";
export type { GuardrailPolicy } from "./store.ts";

/**
 * Guardrails as a process of the service sets them up: their store (with the
 * audit trail the gateway reads), the resolver whose cache every replica
 * keeps in step through Redis, and the gateway's key records in Redis.
 */
export function guardrailsOf(deps: {
  db: Postgres;
  redis: RedisClient;
  authorization: ResourceAuthorization;
  ids: Ids;
  clock: Clock;
  logger: Logger;
  hooks?: ResolverHooks;
}): Guardrails {
  const { db, redis, clock, logger } = deps;
  const store = new GuardrailStore(db, new AuditLog(db, { retentionMs: undefined, logger, clock }), {
    clock,
    changed: (org) => guardrailsChanged(redis, org),
  });
  const resolver = new GuardrailResolver(store, redis, {
    clock,
    ...(deps.hooks ? { hooks: deps.hooks } : {}),
  });
  return new Guardrails({
    store,
    resolver,
    authorization: deps.authorization,
    keys: new RedisKeyRecords(redis),
    ids: deps.ids,
  });
}
