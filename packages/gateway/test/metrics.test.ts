import { describe, expect, it } from "vitest";
import { freshOrg, useGateway } from "./harness.ts";

const TOKEN = "metrics-scraper-token-0123456789";
const WHOAMI = "/api/v1/authentication/whoami";

/** The value of one sample of a Prometheus text exposition, or undefined if absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("metrics on the gateway's own port, behind METRICS_TOKEN", () => {
  const gw = useGateway({ METRICS_TOKEN: TOKEN });
  const scrape = async () => {
    const res = await fetch(gw.metricsUrl, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    return res.text();
  };

  it("are refused without the token, with the catalogue's 401", async () => {
    expect(gw.metricsUrl).toBe(`${gw.url}/metrics`);
    for (const authorization of [undefined, "Bearer wrong", `Bearer ${TOKEN}x`, TOKEN]) {
      const res = await fetch(gw.metricsUrl, { headers: authorization ? { authorization } : {} });
      expect(res.status, authorization).toBe(401);
      expect(await res.json()).toEqual({
        error: "Unauthorized",
        message: expect.any(String),
        code: "unauthorized",
      });
    }
  });

  it("start every series of a closed label set at 0, and export Node's defaults unprefixed", async () => {
    const text = await scrape();
    for (const series of [
      'gateway_rate_limit_fallbacks_total{mode="open"}',
      'gateway_rate_limit_fallbacks_total{mode="closed"}',
      'gateway_rate_limit_decisions_total{outcome="rejected",window="day",store="local"}',
      'gateway_authentications_total{outcome="store_unavailable"}',
      'gateway_jwt_verifications_total{outcome="signature"}',
      'gateway_token_exchanges_total{outcome="forbidden"}',
      'gateway_oauth_tokens_issued_total{grant_type="refresh_token"}',
      'gateway_oauth_token_refusals_total{reason="refresh_token_reused"}',
      'gateway_oauth_registrations_total{kind="metadata_document",outcome="refused"}',
    ]) {
      expect(sample(text, series), series).toBe(0);
    }
    // Failures of the stores are exported before any happens too; a loaded machine may already have timed
    // out a command or two of the harness's shared Redis and SpiceDB, so only their presence is asserted.
    for (const series of [
      'redis_client_command_errors_total{client="gateway-rate-limit",kind="unavailable"}',
      'grpc_client_handled_total{grpc_service="authzed.api.v1.PermissionsService",grpc_method="CheckPermission",grpc_type="unary",grpc_code="UNAVAILABLE"}',
      'grpc_client_handled_total{grpc_service="authzed.api.v1.PermissionsService",grpc_method="LookupResources",grpc_type="server_stream",grpc_code="DEADLINE_EXCEEDED"}',
    ]) {
      expect(sample(text, series), series).toBeGreaterThanOrEqual(0);
    }
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds /m);
    expect(text).not.toMatch(/^gateway_process_/m);
  });

  it("label every outcome of an endpoint with its one template: 200, 401, 403, 422, 429, 502, forwarded ones too", async () => {
    const org = freshOrg();
    const { record, secret } = await gw.createKey({ org, limits: { second: 1, day: 100 } });
    // Its second window opened for a minute: the two calls below meet in one window however slow.
    await gw.redis.set(`gw:rl:{${record.id}}:second`, 0, "PX", 60_000);
    const { secret: readOnly } = await gw.createKey({ org, permissions: ["usage:read"] });
    const { secret: writer } = await gw.createKey({ org });
    const grant = { resourceType: "file", resourceId: "f1", userId: "bob", role: "reader" };
    const statuses = await Promise.all([
      gw.call(WHOAMI, { bearer: secret }),
      gw.call(WHOAMI, { bearer: secret }),
      gw.call(WHOAMI),
      gw.call("/api/v1/authorization/llm/grant", { method: "POST", bearer: readOnly, json: grant }),
      gw.call("/api/v1/authorization/llm/grant", {
        method: "POST",
        bearer: readOnly,
        json: { ...grant, role: "boss" },
      }),
      gw.call("/api/v1/authorization/llm/grant", {
        method: "POST",
        bearer: writer,
        json: { ...grant, role: "boss" },
      }),
      gw.call("/api/v1/llm/conversations/conv_1?x=1"),
      gw.call("/api/v1/llm/conversations/conv_2", { bearer: readOnly }),
      gw.call("/api/v1/no/such/thing", { bearer: readOnly }),
    ]).then((all) => all.map((r) => r.status));
    expect(statuses.slice(0, 2).sort()).toEqual([200, 429]);
    // The permission is checked before the body: both grants are 403. No service runs here: a 502 when forwarded.
    expect(statuses.slice(2)).toEqual([401, 403, 403, 422, 401, 502, 404]);

    const text = await scrape();
    const count = (route: string, status: number, method = "GET") =>
      sample(text, `gateway_http_requests_total{method="${method}",route="${route}",status="${status}"}`);
    for (const status of [200, 401, 429]) expect(count(WHOAMI, status), String(status)).toBeGreaterThan(0);
    expect(count("/api/v1/authorization/llm/grant", 403, "POST")).toBe(2);
    expect(count("/api/v1/authorization/llm/grant", 422, "POST")).toBe(1);
    expect(count("/api/v1/llm/conversations/:id", 401)).toBe(1);
    expect(count("/api/v1/llm/conversations/:id", 502)).toBe(1);
    expect(count("unmatched", 404)).toBeGreaterThan(0);
    expect(text).not.toMatch(/route="\/authorization|route="[^"]*(conv_1|conv_2|f1)/);
  });

  it("count and time every SpiceDB call by method and gRPC code", async () => {
    const { secret } = await gw.createKey();
    const series =
      'grpc_client_handled_total{grpc_service="authzed.api.v1.PermissionsService",grpc_method="CheckPermission",grpc_type="unary",grpc_code="OK"}';
    const before = sample(await scrape(), series) ?? 0;
    const check = await gw.call(
      "/api/v1/authorization/llm/check?resourceType=file&resourceId=f1&role=reader",
      { bearer: secret },
    );
    expect(check.status).toBe(200);
    const text = await scrape();
    expect(sample(text, series)).toBe(before + 1);
    expect(
      sample(
        text,
        'grpc_client_handling_seconds_count{grpc_service="authzed.api.v1.PermissionsService",grpc_method="CheckPermission",grpc_type="unary"}',
      ),
    ).toBe(before + 1);
  });

  it("time Redis commands by connection and command, in buckets from 50 µs", async () => {
    const text = await scrape();
    expect(text).toMatch(
      /^redis_client_command_duration_seconds_count\{client="gateway",command="get"\} [1-9]/m,
    );
    expect(text).toMatch(/^gateway_http_request_duration_seconds_bucket\{le="0\.00005",/m);
  });
});

describe("metrics on a port of their own (METRICS_PORT)", () => {
  const gw = useGateway({ METRICS_PORT: "0" });

  it("are served there, and not on the public port", async () => {
    expect(new URL(gw.metricsUrl).port).not.toBe(new URL(gw.url).port);
    const res = await fetch(gw.metricsUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^# TYPE gateway_http_requests_total counter$/m);
    const publicPort = await fetch(`${gw.url}/metrics`);
    expect(publicPort.status).toBe(404);
    expect((await fetch(new URL("/healthz", gw.metricsUrl))).status).toBe(404);
  });
});
