import { SERVICE_ROUTES } from "@gw/gateway";
import type { UpstreamMode } from "@gw/test-kit/llm-upstream";
import { describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

const stack = useStack({ LLM_TIMEOUT_MS: "500" });

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}
const sample = (text: string, series: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};
const calls = async () => {
  const text = await scrape(stack.serviceUrl);
  return Object.fromEntries(
    ["ok", "error", "rate_limited", "timeout", "cancelled"].map((outcome) => [
      outcome,
      sample(text, `service_llm_requests_total{outcome="${outcome}"}`),
    ]),
  );
};

describe("service metrics", () => {
  it("time PostgreSQL statements and count their errors by kind from 0", async () => {
    const before = await scrape(stack.serviceUrl);
    for (const kind of ["unavailable", "refused"])
      expect(sample(before, `postgres_client_query_errors_total{client="service",kind="${kind}"}`)).toBe(0);
    const statements = (text: string) =>
      sample(text, 'postgres_client_query_duration_seconds_count{client="service"}') ?? 0;
    const key = await stack.createKey();
    const created = await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" });
    expect(created.status).toBe(200);
    // BEGIN, INSERT, COMMIT.
    expect(statements(await scrape(stack.serviceUrl))).toBeGreaterThanOrEqual(statements(before) + 3);
  });

  it("count model provider calls by outcome from 0, with their latency and tokens", async () => {
    const start = await calls();
    expect(Object.values(start).every((n) => typeof n === "number")).toBe(true);
    const key = await stack.createKey();
    const respond = async (mode: UpstreamMode, stream = false) => {
      stack.llm.mode = mode;
      try {
        const res = await stack.call(key.secret, "/api/v1/llm/responses", {
          json: { input: "one two", stream },
        });
        await res.text();
        return res.status;
      } finally {
        stack.llm.mode = "ok";
      }
    };
    const tokensBefore = sample(await scrape(stack.serviceUrl), 'service_llm_tokens_total{kind="input"}')!;
    expect(await respond("ok")).toBe(200);
    expect(await respond("ok", true)).toBe(200);
    expect(await respond("fail")).toBe(502);
    expect(await respond("rate-limit")).toBe(429);
    expect(await respond("stall")).toBe(504);
    const after = await calls();
    expect({
      ok: after.ok! - start.ok!,
      error: after.error! - start.error!,
      rate_limited: after.rate_limited! - start.rate_limited!,
      timeout: after.timeout! - start.timeout!,
      cancelled: after.cancelled! - start.cancelled!,
    }).toEqual({ ok: 2, error: 1, rate_limited: 1, timeout: 1, cancelled: 0 });
    const text = await scrape(stack.serviceUrl);
    // "one two" is 5 tokens of input by the provider's count, twice.
    expect(sample(text, 'service_llm_tokens_total{kind="input"}')! - tokensBefore).toBe(10);
    expect(sample(text, 'service_llm_request_duration_seconds_count{outcome="timeout"}')).toBeGreaterThan(0);
  });

  it("count a call whose client went away as cancelled, not as the provider's failure", async () => {
    const key = await stack.createKey();
    const before = await calls();
    const requested = stack.llm.requests.length;
    stack.llm.mode = "hold";
    const client = new AbortController();
    try {
      const pending = fetch(`${stack.gatewayUrl}/api/v1/llm/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ input: "wait", stream: true }),
        signal: client.signal,
      }).catch(() => undefined);
      await vi.waitFor(() => expect(stack.llm.requests.length).toBe(requested + 1), { timeout: 5_000 });
      client.abort();
      await pending;
      await vi.waitFor(async () => expect((await calls()).cancelled).toBe(before.cancelled! + 1), {
        timeout: 5_000,
      });
    } finally {
      stack.llm.release();
    }
    const after = await calls();
    expect([after.ok, after.error, after.timeout]).toEqual([before.ok, before.error, before.timeout]);
  });

  it("label the gateway's forwarded requests with the service's own templates (SERVICE_ROUTES, read from the OpenAPI document, is what it serves)", async () => {
    const api = stack.serviceRoutes.filter((r) => r.path.startsWith("/api/v1/"));
    const order = (routes: readonly { method: string; path: string }[]) =>
      routes.map((r) => `${r.method} ${r.path}`).sort();
    expect(order(SERVICE_ROUTES)).toEqual(order(api));

    const key = await stack.createKey();
    const created = await stack.call(key.secret, "/api/v1/llm/conversations", { json: {} });
    const { id } = await created.json();
    expect((await stack.call(key.secret, `/api/v1/llm/conversations/${id}`)).status).toBe(200);
    expect((await stack.call("gwsk_nope", `/api/v1/llm/conversations/${id}`)).status).toBe(401);
    const route = "/api/v1/llm/conversations/:id";
    const gateway = await scrape(stack.gatewayUrl);
    expect(sample(gateway, `gateway_http_requests_total{method="GET",route="${route}",status="200"}`)).toBe(
      1,
    );
    expect(sample(gateway, `gateway_http_requests_total{method="GET",route="${route}",status="401"}`)).toBe(
      1,
    );
    const service = await scrape(stack.serviceUrl);
    expect(sample(service, `service_http_requests_total{method="GET",route="${route}",status="200"}`)).toBe(
      1,
    );
  });
});
