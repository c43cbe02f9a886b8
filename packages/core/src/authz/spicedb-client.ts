import { deadlineInterceptor, v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { AppError } from "../errors.ts";
import type { GRPC_CODES, GrpcClientMetrics, GrpcMethod } from "../metrics.ts";
import { endSpan, injectTraceHeaders, startClientSpan, tracingEnabled } from "../tracing.ts";

export { DEFAULT_LOCAL_PRESHARED_KEY, DEFAULT_LOCAL_SPICEDB_PORT } from "./local.ts";
export { v1 };

export interface SpiceDBClientOptions {
  /** `host:port` of SpiceDB's gRPC API. */
  endpoint: string;
  presharedKey: string;
  /** Plaintext gRPC. Off unless explicitly chosen: TLS is the default. */
  insecure: boolean;
  /** Deadline of every call, in milliseconds. */
  deadlineMs: number;
  /** Extra attempts for idempotent reads that fail with UNAVAILABLE (gRPC's own retry policy). */
  readRetries?: number;
  /** Every call's method, status code and latency (a call's retries are part of it). */
  metrics?: GrpcClientMetrics;
}

/** The calls this client makes, so each method's series exist before its first call. */
const METHODS: GrpcMethod[] = [
  ["PermissionsService", "CheckPermission", "unary"],
  ["PermissionsService", "CheckBulkPermissions", "unary"],
  ["PermissionsService", "ReadRelationships", "server_stream"],
  ["PermissionsService", "LookupResources", "server_stream"],
  ["PermissionsService", "WriteRelationships", "unary"],
  ["PermissionsService", "DeleteRelationships", "unary"],
  ["SchemaService", "ReadSchema", "unary"],
].map(([service, method, type]) => ({
  service: `authzed.api.v1.${service}`,
  method: method!,
  type: type as GrpcMethod["type"],
}));

/** SpiceDB could not be reached or did not answer in time: callers must fail closed (503; the gRPC error stays in `cause`, for the log). */
export class SpiceDBUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "The authorization backend is unavailable; try again", {
      cause,
      reason: "spicedb_unavailable",
    });
    this.name = "SpiceDBUnavailable";
  }
}

const TRANSIENT = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED]);

/** The reads, which are idempotent: retried on UNAVAILABLE; writes never are (a write whose answer was lost may have landed). */
const READS = ["CheckPermission", "ReadRelationships", "LookupResources", "ReadSchema"];

/**
 * gRPC's service config: the reads retried on UNAVAILABLE with `retries`
 * extra attempts, 50 ms then three times longer each time (grpc-js adds its
 * jitter), within the call's deadline.
 */
export function retryServiceConfig(retries: number): string {
  return JSON.stringify({
    methodConfig: [
      {
        name: READS.map((method) => ({
          service:
            method === "ReadSchema" ? "authzed.api.v1.SchemaService" : "authzed.api.v1.PermissionsService",
          method,
        })),
        retryPolicy: {
          maxAttempts: retries + 1,
          initialBackoff: "0.05s",
          maxBackoff: "0.45s",
          backoffMultiplier: 3,
          retryableStatusCodes: ["UNAVAILABLE"],
        },
      },
    ],
  });
}

/** Counts every call by method and status code, and times it, as it ends. */
function metricsInterceptor(metrics: GrpcClientMetrics): grpc.Interceptor {
  return (options, nextCall) => {
    const [, service = "", method = ""] = options.method_definition.path.split("/");
    const call: GrpcMethod = {
      service,
      method,
      type: options.method_definition.responseStream ? "server_stream" : "unary",
    };
    const started = process.hrtime.bigint();
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, _listener, next) {
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            const code = (grpc.status[status.code] ?? "UNKNOWN") as (typeof GRPC_CODES)[number];
            metrics.observe(call, code, Number(process.hrtime.bigint() - started) / 1e9);
            nextStatus(status);
          },
        });
      },
    });
  };
}

/**
 * A client span per SpiceDB call, in the caller's trace, its `traceparent`
 * sent as gRPC metadata (SpiceDB continues the trace when it is traced too).
 * Only installed when tracing is on.
 */
function tracingInterceptor(): grpc.Interceptor {
  return (options, nextCall) => {
    const path = options.method_definition.path;
    const [, service = "", method = ""] = path.split("/");
    const span = startClientSpan(`SpiceDB ${method}`, {
      "rpc.system": "grpc",
      "rpc.service": service,
      "rpc.method": method,
    });
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, _listener, next) {
        const carrier: Record<string, string> = {};
        injectTraceHeaders(carrier, span);
        for (const [name, value] of Object.entries(carrier)) metadata.set(name, value);
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            endSpan(span, status.code === grpc.status.OK ? undefined : grpc.status[status.code], {
              "rpc.grpc.status_code": status.code,
            });
            nextStatus(status);
          },
        });
      },
    });
  };
}

/**
 * The one way gateway and service talk to SpiceDB (docs/adr/0001-one-grpc-path-to-spicedb.md):
 * authzed-node over gRPC, one shared connection per process, a deadline on
 * every call, idempotent reads retried on UNAVAILABLE, every call counted
 * and timed (`grpc_client_*`). Transport failures
 * surface as `SpiceDBUnavailable`, so callers can fail closed with a 503.
 */
export class SpiceDBClient {
  private readonly client: v1.ZedClientInterface;

  constructor(options: SpiceDBClientOptions) {
    this.client = v1.NewClient(
      options.presharedKey,
      options.endpoint,
      options.insecure ? v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS : v1.ClientSecurity.SECURE,
      1, // PreconnectServices.PERMISSIONS_SERVICE: open the connection at start-up, not on the first request
      {
        // authzed-node's own deadline interceptor, first, so ours (not its 30 s default) is set.
        interceptors: [
          deadlineInterceptor(options.deadlineMs),
          ...(options.metrics ? [metricsInterceptor(options.metrics)] : []),
          ...(tracingEnabled() ? [tracingInterceptor()] : []),
        ],
        // gRPC accepts a retry policy of two attempts or more only.
        ...((options.readRetries ?? 2) > 0
          ? { "grpc.service_config": retryServiceConfig(options.readRetries ?? 2) }
          : {}),
      },
    );
    for (const method of METHODS) options.metrics?.track(method);
  }

  checkPermission(request: v1.CheckPermissionRequest): Promise<v1.CheckPermissionResponse> {
    return this.read(() => this.client.promises.checkPermission(request));
  }

  checkBulkPermissions(request: v1.CheckBulkPermissionsRequest): Promise<v1.CheckBulkPermissionsResponse> {
    return this.read(() => this.client.promises.checkBulkPermissions(request));
  }

  readRelationships(request: v1.ReadRelationshipsRequest): Promise<v1.ReadRelationshipsResponse[]> {
    return this.read(() => this.client.promises.readRelationships(request));
  }

  lookupResources(request: v1.LookupResourcesRequest): Promise<v1.LookupResourcesResponse[]> {
    return this.read(() => this.client.promises.lookupResources(request));
  }

  readSchema(): Promise<v1.ReadSchemaResponse> {
    return this.read(() => this.client.promises.readSchema(v1.ReadSchemaRequest.create({})));
  }

  /** Writes are not retried: a write whose answer was lost may have landed. */
  writeRelationships(request: v1.WriteRelationshipsRequest): Promise<v1.WriteRelationshipsResponse> {
    return this.once(() => this.client.promises.writeRelationships(request));
  }

  deleteRelationships(request: v1.DeleteRelationshipsRequest): Promise<v1.DeleteRelationshipsResponse> {
    return this.once(() => this.client.promises.deleteRelationships(request));
  }

  close(): void {
    this.client.close();
  }

  /** A read: gRPC retries it on UNAVAILABLE (`retryServiceConfig`). */
  private read<T>(call: () => Promise<T>): Promise<T> {
    return this.once(call);
  }

  private async once<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw wrap(err);
    }
  }
}

function wrap(err: unknown): unknown {
  return TRANSIENT.has((err as grpc.ServiceError).code) ? new SpiceDBUnavailable(err) : err;
}

/** Whether a gRPC error says the request was malformed (a cursor SpiceDB no longer takes, say). */
export function isInvalidArgument(err: unknown): boolean {
  return (err as grpc.ServiceError).code === grpc.status.INVALID_ARGUMENT;
}

/** Whether a gRPC error says a write precondition did not hold. */
export function isFailedPrecondition(err: unknown): boolean {
  return (err as grpc.ServiceError).code === grpc.status.FAILED_PRECONDITION;
}
