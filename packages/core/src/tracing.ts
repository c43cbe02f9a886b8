import {
  type Attributes,
  type Context,
  context,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type { Sampler, SpanExporter, SpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { z } from "zod";

export type { Span };

/**
 * OpenTelemetry traces of every hop (docs/operations.md, "Traces"). Spans are
 * made here, explicitly, at the few places every hop already passes (the
 * request basics of each process, the forward to the service, the gRPC
 * interceptor of SpiceDB, the Redis and PostgreSQL clients' settlement
 * hooks, the model provider's transport): the processes run TypeScript as
 * ES modules, where the auto-instrumentations' require hooks see nothing
 * unless loaded with `--import`, and the tests load modules through vitest,
 * where no hook sees them at all. Off unless an exporter is configured; then
 * every helper below returns at its first line, and nothing but the API is
 * loaded: the SDK and the exporters (a third of a second of every process's
 * start) are imported when `startTracing` turns tracing on.
 */

const TRACES_SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;

/** The standard `OTEL_*` variables this project reads (the OTLP exporter reads the rest of `OTEL_EXPORTER_OTLP_*` itself). */
export const tracingEnvShape = {
  /** `true` turns tracing off whatever else is set. */
  OTEL_SDK_DISABLED: z.enum(["true", "false"]).optional(),
  /** `otlp` (the default once an OTLP endpoint is set), `console` (spans on stderr, for debugging) or `none`. Unset with no OTLP endpoint: tracing is off and costs nothing. */
  OTEL_TRACES_EXPORTER: z.enum(["otlp", "console", "none"]).optional(),
  /** OTLP collector base URL (`http://collector:4318`; traces go to `/v1/traces`); setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  /** OTLP URL for traces alone (used as is); setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url().optional(),
  /** OTLP transport: `http/protobuf`, `http/json` or `grpc`. Default http/protobuf. */
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(["http/protobuf", "http/json", "grpc"]).optional(),
  /** The same, for traces alone (wins over OTEL_EXPORTER_OTLP_PROTOCOL). */
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(["http/protobuf", "http/json", "grpc"]).optional(),
  /** Headers sent to the collector, `key=value,key=value` (e.g. an API key of the tracing vendor). */
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  /** Which traces are kept: one of `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio`. Default parentbased_always_on (a caller's sampled `traceparent` is followed). */
  OTEL_TRACES_SAMPLER: z.enum(TRACES_SAMPLERS).optional(),
  /** The ratio of the `*traceidratio` samplers, 0 to 1. Default 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  /** `service.name` of the spans. Default the process: `gateway`, `service`, `eval-worker`. */
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  /** More resource attributes of the spans, `key=value,key=value` (`deployment.environment.name=prod`). */
  OTEL_RESOURCE_ATTRIBUTES: z.string().optional(),
};

export type TracingEnv = { [K in keyof typeof tracingEnvShape]?: z.output<(typeof tracingEnvShape)[K]> };

/** Whether spans are made at all; false until `startTracing` finds an exporter. */
let enabled = false;
let provider: TracerProvider | undefined;

/** Whether tracing is on in this process. */
export function tracingEnabled(): boolean {
  return enabled;
}

export interface StartTracingOptions {
  /** Instead of the exporter the environment names (tests: an `InMemorySpanExporter`). */
  exporter?: SpanExporter;
  /** Export each span as it ends instead of in batches (tests). */
  simple?: boolean;
}

/**
 * Turns tracing on for this process when the environment configures an
 * exporter (or `options.exporter` is given): a tracer provider with the
 * sampler of `OTEL_TRACES_SAMPLER`, W3C `traceparent`/`tracestate` and
 * baggage propagation, and the context of the current request carried
 * across `await`s (AsyncLocalStorage). Returns whether it is on. Idempotent
 * per process: a second call changes nothing.
 */
export async function startTracing(
  serviceName: string,
  env: TracingEnv,
  options: StartTracingOptions = {},
): Promise<boolean> {
  if (provider) return true;
  const exporter = options.exporter ?? (await traceExporterOf(env));
  if (!exporter) return false;
  const [sdk, resources, { AsyncLocalStorageContextManager }, otel] = await Promise.all([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/core"),
  ]);
  if (provider) return true; // another call turned it on meanwhile
  const processor: SpanProcessor = options.simple
    ? new sdk.SimpleSpanProcessor({ exporter })
    : new sdk.BatchSpanProcessor({ exporter });
  const resource = resources
    .resourceFromAttributes({ "service.name": serviceName })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  provider = new sdk.TracerProvider({ sampler: samplerOf(sdk, env), resource, spanProcessors: [processor] });
  const contextManager = new AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(
    new otel.CompositePropagator({
      propagators: [new otel.W3CTraceContextPropagator(), new otel.W3CBaggagePropagator()],
    }),
  );
  trace.setGlobalTracerProvider(provider);
  enabled = true;
  return true;
}

/**
 * Sends the spans still buffered and turns tracing off (at shutdown): the global tracer provider,
 * propagator and context manager are removed, so a later `startTracing` in the same process starts afresh.
 */
export async function stopTracing(): Promise<void> {
  const stopping = provider;
  if (!stopping) return;
  enabled = false;
  provider = undefined;
  await stopping.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
}

/** Exports every span ended so far (tests read their exporter after this). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
}

/** The exporter the environment names, if any: none unless an OTLP endpoint or `OTEL_TRACES_EXPORTER` says so. */
export async function traceExporterOf(env: TracingEnv): Promise<SpanExporter | undefined> {
  if (env.OTEL_SDK_DISABLED === "true") return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const kind = env.OTEL_TRACES_EXPORTER ?? (endpoint ? "otlp" : "none");
  if (kind === "console") return new (await import("@opentelemetry/sdk-trace")).ConsoleSpanExporter();
  if (kind !== "otlp") return undefined;
  const protocol =
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf";
  // The URL as the specification builds it (the exporters read headers, timeout and compression themselves).
  const url =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (env.OTEL_EXPORTER_OTLP_ENDPOINT && protocol !== "grpc"
      ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces`
      : env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const config = url ? { url } : {};
  switch (protocol) {
    case "grpc":
      return new (await import("@opentelemetry/exporter-trace-otlp-grpc")).OTLPTraceExporter(config);
    case "http/json":
      return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter(config);
    default:
      return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter(config);
  }
}

function samplerOf(sdk: typeof import("@opentelemetry/sdk-trace"), env: TracingEnv): Sampler {
  const ratio = env.OTEL_TRACES_SAMPLER_ARG ?? 1;
  switch (env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on") {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) });
    default:
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
}

const tracer = () => trace.getTracer("llm-authz-gateway");

/**
 * The server span of one incoming request, its parent taken from the
 * caller's `traceparent`; `next` (the rest of the request's middleware) runs
 * inside it. `undefined` when tracing is off.
 */
export function startServerSpan(
  headers: Record<string, string | string[] | undefined>,
  name: string,
  attributes: Attributes,
  next: () => void,
): Span | undefined {
  if (!enabled) {
    next();
    return undefined;
  }
  const parent = propagation.extract(context.active(), headers);
  const span = tracer().startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  context.with(trace.setSpan(parent, span), next);
  return span;
}

/**
 * A client span for a call to another system (a hop), started in the
 * current context; the caller ends it with `endSpan`. `undefined` when off,
 * and outside a sampled request: background work (a key-change subscriber's
 * Redis reads, BullMQ's polling) makes no traces of its own, and a request
 * the sampler left out costs no span below its own (its `traceparent` still
 * goes on, unsampled).
 */
export function startClientSpan(name: string, attributes: Attributes): Span | undefined {
  if (!enabled || !trace.getActiveSpan()?.isRecording()) return undefined;
  return tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes });
}

/** Ends a span from `startClientSpan`/`startServerSpan`, marking it failed when `error` is given. */
export function endSpan(span: Span | undefined, error?: unknown, attributes?: Attributes): void {
  if (!span) return;
  if (attributes) span.setAttributes(attributes);
  if (error !== undefined) {
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.name : String(error),
    });
  }
  span.end();
}

/**
 * Writes the W3C `traceparent` (and `tracestate`, baggage) of `span`, or of
 * the current context, into the headers of an outgoing call: to the service,
 * to the model provider, and to an MCP upstream (call this where a request
 * to an upstream is built). Nothing when tracing is off.
 */
export function injectTraceHeaders(headers: Record<string, string | string[]>, span?: Span): void {
  if (!enabled) return;
  const ctx: Context = span ? trace.setSpan(context.active(), span) : context.active();
  propagation.inject(ctx, headers);
}

/** `trace_id` and `span_id` of the current span, for every log line written inside a request. */
export function traceFields(): { trace_id?: string; span_id?: string } {
  if (!enabled) return {};
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** The trace id of `span` (the access line names the request's trace). */
export function traceIdOf(span: Span | undefined): string | undefined {
  return span?.spanContext().traceId;
}
