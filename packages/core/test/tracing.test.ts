import { createServer, type IncomingHttpHeaders } from "node:http";
import { ExportResultCode } from "@opentelemetry/core";
import { TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { traceExporterOf } from "../src/tracing.ts";

/** An OTLP/HTTP receiver that keeps what it was sent. */
const received: { url: string; headers: IncomingHttpHeaders; body: Buffer }[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    received.push({ url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) });
    res.writeHead(200, { "content-type": String(req.headers["content-type"]) }).end();
  });
});
let endpoint = "";
beforeAll(async () => {
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  endpoint = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((r) => receiver.close(() => r())));

/** One span, exported by `exporter`; resolves with the export's result code. */
async function exportOne(exporter: NonNullable<Awaited<ReturnType<typeof traceExporterOf>>>) {
  const spans: Parameters<typeof exporter.export>[0] = [];
  const provider = new TracerProvider({
    spanProcessors: [
      { onStart() {}, onEnd: (s) => spans.push(s), forceFlush: async () => {}, shutdown: async () => {} },
    ],
  });
  provider.getTracer("test").startSpan("one span").end();
  const code = await new Promise<ExportResultCode>((resolve) =>
    exporter.export(spans, (r) => resolve(r.code)),
  );
  await exporter.shutdown();
  return code;
}

describe("the trace exporter the OTEL_* variables name", () => {
  it("none unless an endpoint or an exporter is named, and none when the SDK is disabled", async () => {
    expect(await traceExporterOf({})).toBeUndefined();
    expect(
      await traceExporterOf({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://x:4318" }),
    ).toBeUndefined();
    expect(
      await traceExporterOf({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://x:4318" }),
    ).toBeUndefined();
    expect(await traceExporterOf({ OTEL_TRACES_EXPORTER: "console" })).toBeDefined();
  });

  it.each([
    ["http/protobuf", "application/x-protobuf"],
    ["http/json", "application/json"],
  ] as const)("OTLP over %s: spans reach the collector's /v1/traces", async (protocol, contentType) => {
    received.length = 0;
    const exporter = await traceExporterOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    });
    expect(exporter).toBeDefined();
    expect(await exportOne(exporter!)).toBe(ExportResultCode.SUCCESS);
    expect(received.map((r) => [r.url, r.headers["content-type"]])).toEqual([["/v1/traces", contentType]]);
    expect(received[0]!.body.toString("latin1")).toContain("one span");
  });
});
