import { randomBytes } from "node:crypto";
import { flushTracing, startTracing, stopTracing } from "@gw/core/tracing";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

// Before the stack starts: its clients install their span hooks only when tracing is on.
const exporter = new InMemorySpanExporter();
await startTracing("stack-test", {}, { exporter, simple: true });
// Registered before the stack's: after-all hooks run last-registered first, so tracing stops once the
// stack has, and the next file in this worker starts untraced.
afterAll(() => stopTracing());

const logLines: string[] = [];
const stack = useStack({}, {}, logLines);

/** A caller's W3C trace context: a fresh trace id and the caller's own span id. */
function callerTrace() {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** The spans of one trace, and helpers to walk its tree. */
async function traceOf(traceId: string) {
  // The server spans end as the answers finish, which may be just after the client has read them.
  await expect
    .poll(async () => {
      await flushTracing();
      return exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId && isServer(s))
        .length;
    })
    .toBe(2);
  await flushTracing();
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
  const childrenOf = (parent: ReadableSpan) =>
    spans.filter((s) => parentOf(s) === parent.spanContext().spanId);
  const below = (parent: ReadableSpan): ReadableSpan[] =>
    childrenOf(parent).flatMap((child) => [child, ...below(child)]);
  const named = (list: ReadableSpan[], pattern: RegExp) => list.filter((s) => pattern.test(s.name));
  return { spans, parentOf, childrenOf, below, named };
}

const isServer = (s: ReadableSpan) => s.kind === 1; // SpanKind.SERVER

beforeEach(() => {
  exporter.reset();
});

describe("traces of every hop, under the caller's traceparent", () => {
  it("a stored response: gateway, forward, service, SpiceDB, PostgreSQL, Redis and the provider, in one trace", async () => {
    const key = await stack.createKey();
    const caller = callerTrace();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { input: "trace me", store: true },
      user: "alice",
      headers: { traceparent: caller.traceparent },
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };

    const t = await traceOf(caller.traceId);
    // The gateway's server span continues the caller's trace, as the caller's span's child.
    const roots = t.spans.filter((s) => t.parentOf(s) === caller.spanId);
    expect(roots.map((s) => [s.name, s.kind])).toEqual([["POST /api/v1/llm/responses", 1]]);
    const gateway = roots[0]!;
    expect(gateway.attributes["http.response.status_code"]).toBe(200);
    // The gateway's own work: the API key from Redis, then the hop to the service.
    expect(t.named(t.below(gateway), /^Redis /).length).toBeGreaterThan(0);
    const hop = t.named(t.childrenOf(gateway), /^forward to service$/);
    expect(hop).toHaveLength(1);
    const service = t.childrenOf(hop[0]!);
    expect(service.map((s) => [s.name, s.kind])).toEqual([["POST /api/v1/llm/responses", 1]]);
    const work = t.below(service[0]!);
    // The owner relationship in SpiceDB, the rows in PostgreSQL, usage and ZedTokens in Redis, the model.
    expect(t.named(work, /^SpiceDB WriteRelationships$/).length).toBeGreaterThan(0);
    expect(t.named(work, /^PostgreSQL INSERT$/).length).toBeGreaterThan(0);
    expect(t.named(work, /^Redis /).length).toBeGreaterThan(0);
    const provider = t.named(work, /^model provider chat$/);
    expect(provider).toHaveLength(1);
    expect(provider[0]!.attributes["gen_ai.request.model"]).toBe("echo-small");
    // Nothing of the request escaped its trace: every span hangs below the gateway's.
    const inTree = new Set([gateway, ...t.below(gateway)]);
    expect(t.spans.filter((s) => !inTree.has(s))).toEqual([]);

    // The provider got the trace too: same trace id, its parent the provider span.
    const sent = stack.llm.requests.slice(before);
    expect(sent.map((r) => r.traceparent)).toEqual([
      `00-${caller.traceId}-${provider[0]!.spanContext().spanId}-01`,
    ]);

    // Every log line of the request names its trace; its one access line (the gateway's) too.
    const lines = logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const access = lines.filter((l) => l.msg === "request" && l.trace_id === caller.traceId);
    expect(access).toHaveLength(1);
    expect(id).toMatch(/^resp_/);
  });

  it("a refused read: the SpiceDB check that refused it is in the caller's trace, and nothing reached the provider", async () => {
    const key = await stack.createKey();
    const created = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { input: "alice's", store: true },
      user: "alice",
    });
    expect(created.status).toBe(200);
    const { id } = (await created.json()) as { id: string };
    exporter.reset();
    const caller = callerTrace();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, `/api/v1/llm/responses/${id}`, {
      user: "mallory",
      headers: { traceparent: caller.traceparent },
    });
    expect(res.status).toBe(404);

    const t = await traceOf(caller.traceId);
    const gateway = t.spans.find((s) => t.parentOf(s) === caller.spanId)!;
    expect(gateway.name).toBe("GET /api/v1/llm/responses/:id");
    expect(gateway.attributes["http.response.status_code"]).toBe(404);
    const service = t.below(gateway).filter(isServer);
    expect(service.map((s) => s.name)).toEqual(["GET /api/v1/llm/responses/:id"]);
    const checks = t.named(t.below(service[0]!), /^SpiceDB CheckPermission$/);
    expect(checks.length).toBeGreaterThan(0);
    expect(t.named(t.spans, /^model provider/)).toEqual([]);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("a line the service logs inside the request (a provider failure) names the caller's trace and its span", async () => {
    const key = await stack.createKey();
    const caller = callerTrace();
    stack.llm.mode = "fail";
    try {
      const res = await stack.call(key.secret, "/api/v1/llm/chat/completions", {
        json: { model: "echo-small", messages: [{ role: "user", content: "fail" }] },
        user: "alice",
        headers: { traceparent: caller.traceparent },
      });
      expect(res.status).toBeGreaterThanOrEqual(500);
      await res.arrayBuffer();
    } finally {
      stack.llm.mode = "ok";
    }
    const t = await traceOf(caller.traceId);
    const spanIds = new Set(t.spans.map((s) => s.spanContext().spanId));
    const warnings = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => Number(l.level) >= 40 && l.trace_id === caller.traceId);
    expect(warnings.length).toBeGreaterThan(0);
    for (const line of warnings) expect(spanIds.has(String(line.span_id))).toBe(true);
  });

  it("a caller's unsampled traceparent: no span is exported, and the provider still gets the trace, unsampled", async () => {
    const key = await stack.createKey();
    const caller = callerTrace();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, "/api/v1/llm/chat/completions", {
      json: { model: "echo-small", messages: [{ role: "user", content: "not sampled" }] },
      user: "alice",
      headers: { traceparent: `00-${caller.traceId}-${caller.spanId}-00` },
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await flushTracing();
    expect(exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === caller.traceId)).toEqual([]);
    const sent = stack.llm.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.traceparent).toMatch(new RegExp(`^00-${caller.traceId}-[0-9a-f]{16}-00$`));
  });

  it("a caller without a traceparent gets a trace of its own, named in its one access line", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, "/api/v1/llm/responses/resp_missing", { user: "alice" });
    expect(res.status).toBe(404);
    const requestId = res.headers.get("x-request-id");
    await expect
      .poll(() =>
        logLines
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .filter((l) => l.msg === "request" && l.requestId === requestId),
      )
      .toHaveLength(1);
    const access = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === "request" && l.requestId === requestId);
    expect(access[0]!.trace_id).toMatch(/^[0-9a-f]{32}$/);
  });
});
