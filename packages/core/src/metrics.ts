import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";
import {
  DECISION_CACHE_INVALIDATIONS,
  DECISION_CACHE_LOOKUPS,
  type DecisionCacheMetrics,
} from "./authz/decision-cache.ts";
import type { PostgresQueryObserver } from "./postgres.ts";
import type { RedisCommandObserver } from "./redis.ts";

/**
 * Latency buckets from 50 µs to 10 s, each at most twice the one below it up
 * to 100 ms: a gateway answers in well under a millisecond, so its
 * quantiles need buckets there, and its slowest dependency (a model) takes
 * seconds.
 */
export const LATENCY_BUCKETS = [
  0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015,
  0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** gRPC status codes by name, as `grpc_code` labels carry them. */
export const GRPC_CODES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** A gRPC method as `grpc_client_*` metrics name it. */
export interface GrpcMethod {
  service: string;
  method: string;
  type: "unary" | "server_stream";
}

/** gRPC client calls (SpiceDB's), under the names go-grpc-prometheus made standard. */
export interface GrpcClientMetrics {
  /** Every code of `method` starts at 0. */
  track(method: GrpcMethod): void;
  observe(method: GrpcMethod, code: (typeof GRPC_CODES)[number], seconds: number): void;
}

/**
 * One registry per process: Node's default metrics (unprefixed, as stock
 * dashboards expect: `process_*`, `nodejs_*`; Prometheus's `job` tells the
 * processes apart), the HTTP metrics every process shares, and its
 * dependencies' (Redis commands, SpiceDB calls). Labels never carry key ids
 * or user ids: they would explode cardinality and leak identities into
 * dashboards.
 */
export function createMetrics(
  prefix: string,
  /**
   * `processMetrics: false`: no `process_*` and `nodejs_*` series, for a part that shares its process
   * with another that exports them (the service in the gateway's process), so they are not counted twice.
   */
  options: { processMetrics?: boolean } = {},
) {
  const registry = new Registry();
  const registers = [registry];
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const httpRequests = new Counter({
    name: `${prefix}_http_requests_total`,
    help: "HTTP requests answered, by method, route template and status code.",
    labelNames: ["method", "route", "status"] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: `${prefix}_http_request_duration_seconds`,
    help: "Time from receiving a request to finishing its response, by method and route template.",
    labelNames: ["method", "route"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  return {
    registry,
    prefix,
    httpRequests,
    httpDuration,
    redisCommands: redisCommandMetrics(registers),
    postgresQueries: postgresQueryMetrics(registers),
    grpcClient: grpcClientMetrics(registers),
    decisionCache: decisionCacheMetrics(prefix, registers),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

function redisCommandMetrics(registers: Registry[]): RedisCommandObserver {
  const duration = new Histogram({
    name: "redis_client_command_duration_seconds",
    help: "Time from sending a Redis command to its answer, by connection (client) and command.",
    labelNames: ["client", "command"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const errors = new Counter({
    name: "redis_client_command_errors_total",
    help: "Redis commands that failed, by connection (client) and kind: unavailable (no answer: connection lost, timed out, cluster down) or reply (Redis refused the command).",
    labelNames: ["client", "kind"] as const,
    registers,
  });
  // Children by client and command: label lookups cost more than the observation itself.
  const children = new Map<string, ReturnType<typeof duration.labels>>();
  return {
    track(client) {
      for (const kind of ["unavailable", "reply"]) errors.inc({ client, kind }, 0);
    },
    observe(client, command, seconds, error) {
      const key = `${client}\u0000${command}`;
      let child = children.get(key);
      if (!child) {
        child = duration.labels(client, command);
        children.set(key, child);
      }
      child.observe(seconds);
      if (error) errors.inc({ client, kind: error });
    },
  };
}

function decisionCacheMetrics(prefix: string, registers: Registry[]): DecisionCacheMetrics {
  const lookups = new Counter({
    name: `${prefix}_decision_cache_lookups_total`,
    help: "Permission checks by how the decision cache served them: hit, miss (SpiceDB asked), bypass (right after a write, Redis unreadable, or Redis back for less than SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: SpiceDB asked).",
    labelNames: ["outcome"] as const,
    registers,
  });
  const invalidations = new Counter({
    name: `${prefix}_decision_cache_invalidations_total`,
    help: "Kept check decisions dropped, by reason: write (the resource's ZedToken changed), max_age, grant_expiry, redis_outage (the connection to Redis broke since it was kept).",
    labelNames: ["reason"] as const,
    registers,
  });
  const byOutcome = new Map(DECISION_CACHE_LOOKUPS.map((o) => [o, lookups.labels(o)]));
  const byReason = new Map(DECISION_CACHE_INVALIDATIONS.map((r) => [r, invalidations.labels(r)]));
  for (const child of [...byOutcome.values(), ...byReason.values()]) child.inc(0);
  return {
    lookup: (outcome) => byOutcome.get(outcome)!.inc(),
    invalidated: (reason) => byReason.get(reason)!.inc(),
  };
}

function postgresQueryMetrics(registers: Registry[]): PostgresQueryObserver {
  const duration = new Histogram({
    name: "postgres_client_query_duration_seconds",
    help: "Time from sending a PostgreSQL statement to its answer, by pool (client).",
    labelNames: ["client"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const errors = new Counter({
    name: "postgres_client_query_errors_total",
    help: "PostgreSQL statements that failed, by pool (client) and kind: unavailable (no answer: refused, lost, past a deadline) or refused (PostgreSQL's own error, e.g. a constraint).",
    labelNames: ["client", "kind"] as const,
    registers,
  });
  return {
    track(client) {
      for (const kind of ["unavailable", "refused"]) errors.inc({ client, kind }, 0);
    },
    observe(client, seconds, error) {
      duration.observe({ client }, seconds);
      if (error) errors.inc({ client, kind: error });
    },
  };
}

function grpcClientMetrics(registers: Registry[]): GrpcClientMetrics {
  const labels = ["grpc_service", "grpc_method", "grpc_type"] as const;
  const handled = new Counter({
    name: "grpc_client_handled_total",
    help: "gRPC calls (to SpiceDB) completed, by service, method, type and status code.",
    labelNames: [...labels, "grpc_code"] as const,
    registers,
  });
  const handling = new Histogram({
    name: "grpc_client_handling_seconds",
    help: "Time from starting a gRPC call (to SpiceDB) to its status, by service, method and type.",
    labelNames: labels,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const labelsOf = (m: GrpcMethod) => ({ grpc_service: m.service, grpc_method: m.method, grpc_type: m.type });
  return {
    track(method) {
      for (const grpc_code of GRPC_CODES) handled.inc({ ...labelsOf(method), grpc_code }, 0);
    },
    observe(method, grpc_code, seconds) {
      handled.inc({ ...labelsOf(method), grpc_code });
      handling.observe(labelsOf(method), seconds);
    },
  };
}
