import { randomBytes } from "node:crypto";
import { EventEmitter, once } from "node:events";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { ASSERTION_HEADER, InternalAssertions } from "@gw/core/internal-assertion";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useGateway } from "../../test/harness.ts";

/**
 * A stand-in for the service: records what reaches it; `/api/v1/llm/stall` never answers,
 * `/api/v1/llm/stall-body` sends its headers and part of a body, then nothing more.
 */
const seen: { url: string; headers: IncomingHttpHeaders; body: string }[] = [];
/** Requests to `/stall-body` whose connection the gateway closed; `stalls` emits `closed` for each. */
let stalledClosed = 0;
const stalls = new EventEmitter();
let fake: Server;
let fakeUrl = "";
beforeAll(async () => {
  fake = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    seen.push({ url: req.url!, headers: req.headers, body });
    if (req.url?.startsWith("/api/v1/llm/stall-body")) {
      res.on("close", () => {
        stalledClosed++;
        stalls.emit("closed");
      });
      res.writeHead(200, { "content-type": "text/event-stream" }).write("data: partial\n\n");
      return;
    }
    if (req.url?.startsWith("/api/v1/llm/stall")) return;
    res.writeHead(201, { "content-type": "application/json", "x-service": "yes" }).end('{"ok":true}');
  });
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
});
afterAll(() => {
  fake.closeAllConnections();
  fake.close();
});

describe("forwarding to the service", () => {
  const gw = useGateway({ SERVICE_TIMEOUT_MS: "1000", SERVICE_IDLE_TIMEOUT_MS: "300" }, () => ({
    SERVICE_URL: fakeUrl,
  }));

  it("passes method, path, query, body and the service's answer; the caller's credentials stay at the gateway", async () => {
    const { secret } = await gw.createKey({ owner: "backend" });
    const res = await gw.call("/api/v1/llm/responses?x=1", {
      method: "POST",
      bearer: secret,
      headers: { "x-on-behalf-of": "alice", "x-custom": "kept" },
      json: { hello: "world" },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("x-service")).toBe("yes");
    expect(await res.json()).toEqual({ ok: true });
    const got = seen.at(-1)!;
    expect(got.url).toBe("/api/v1/llm/responses?x=1");
    expect(got.body).toBe('{"hello":"world"}');
    expect(got.headers["x-custom"]).toBe("kept");
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers["x-on-behalf-of"]).toBeUndefined();
    expect(got.headers["x-gateway-assertion"]).toMatch(/^ey/);
    expect(got.headers["x-request-id"]).toBe(res.headers.get("x-request-id"));
    const metrics = await (await gw.call("/metrics")).text();
    // Labelled with the service's own template for the endpoint.
    expect(metrics).toContain('route="/api/v1/llm/responses",status="201"');
  });

  it("does not forward unauthenticated or over-quota requests", async () => {
    const before = seen.length;
    expect((await gw.call("/api/v1/llm/things")).status).toBe(401);
    const { secret } = await gw.createKey({ limits: { minute: 1 } });
    expect((await gw.call("/api/v1/usage", { bearer: secret })).status).toBe(201);
    expect((await gw.call("/api/v1/usage", { bearer: secret })).status).toBe(429);
    expect(seen.length).toBe(before + 1);
  });

  it("answers 504 in JSON when the service does not answer in time", async () => {
    const { secret } = await gw.createKey();
    const res = await gw.call("/api/v1/llm/stall", { bearer: secret });
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual({
      error: {
        message: "The service did not answer in time",
        type: "server_error",
        code: "gateway_timeout",
        param: null,
      },
    });
  });

  it("ends an answer the service stops sending mid-body after the idle timeout, and frees the service", async () => {
    const { secret } = await gw.createKey();
    const { url } = gw;
    const serviceFreed = once(stalls, "closed");
    const outcome = await new Promise<{ status?: number; body: string; complete: boolean }>(
      (resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the stalled answer was never ended")), 10_000);
        request(`${url}/api/v1/llm/stall-body`, { headers: { authorization: `Bearer ${secret}` } }, (res) => {
          let body = "";
          res.on("data", (chunk) => {
            body += chunk;
          });
          res.on("close", () => {
            clearTimeout(timer);
            resolve({ status: res.statusCode, body, complete: res.complete });
          });
        })
          .on("error", () => undefined)
          .end();
      },
    );
    expect(outcome).toEqual({ status: 200, body: "data: partial\n\n", complete: false });
    await serviceFreed;
    expect(stalledClosed).toBe(1);
  });
});

/**
 * The service in the gateway's process (`@gw/gateway-with-service`): a stand-in
 * handler is handed the request as the service's application would be.
 */
describe("handing requests to the service in the gateway's process", () => {
  const secret = randomBytes(32).toString("hex");
  const handed: {
    url: string;
    headers: IncomingHttpHeaders;
    rawHeaders: string[];
    distinct: Record<string, string[] | undefined>;
    baseUrl: string | undefined;
    locals: string[];
    body: string;
  }[] = [];
  const aborted = new EventEmitter();
  const service = async (req: IncomingMessage, res: ServerResponse) => {
    const locals = Object.keys((res as unknown as { locals: object }).locals);
    const snapshot = {
      url: req.url!,
      headers: { ...req.headers },
      rawHeaders: [...req.rawHeaders],
      distinct: { ...req.headersDistinct },
      baseUrl: (req as IncomingMessage & { baseUrl?: string }).baseUrl,
      locals,
    };
    if (req.url?.startsWith("/api/v1/llm/hold")) {
      res.on("close", () => aborted.emit("closed", res.writableFinished));
      res.writeHead(200, { "content-type": "text/event-stream" }).write("data: first\n\n");
      handed.push({ ...snapshot, body: "" });
      return;
    }
    let body = "";
    for await (const chunk of req) body += chunk;
    handed.push({ ...snapshot, body });
    res.writeHead(201, { "content-type": "application/json", "x-service": "in-process" }).end('{"ok":true}');
  };
  const gw = useGateway(
    { INTERNAL_ASSERTION_SECRET: secret, SERVICE_TIMEOUT_MS: "1000" },
    undefined,
    undefined,
    undefined,
    (req, res) => void service(req, res),
  );

  it("hands over path, query and body as received, with an assertion for exactly that request and without the caller's credentials", async () => {
    const { secret: key, record } = await gw.createKey({ owner: "backend" });
    const res = await gw.call("/api/v1/llm/responses?x=1&y=%2F", {
      method: "POST",
      bearer: key,
      headers: { "x-on-behalf-of": "alice", "x-custom": "kept", [ASSERTION_HEADER]: "forged" },
      json: { hello: "world" },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("x-service")).toBe("in-process");
    expect(await res.json()).toEqual({ ok: true });
    const got = handed.at(-1)!;
    expect(got.url).toBe("/api/v1/llm/responses?x=1&y=%2F");
    expect(got.body).toBe('{"hello":"world"}');
    expect(got.headers["x-custom"]).toBe("kept");
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers["x-on-behalf-of"]).toBeUndefined();
    // Not in the raw list either, which some code reads instead of `headers`.
    const rawNames = got.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(rawNames).not.toContain("authorization");
    expect(rawNames).not.toContain("x-on-behalf-of");
    expect(rawNames.filter((n) => n === ASSERTION_HEADER)).toHaveLength(1);
    // Nor in `headersDistinct`, which Node computed once, while the gateway authenticated.
    expect(got.distinct.authorization).toBeUndefined();
    expect(got.distinct["x-on-behalf-of"]).toBeUndefined();
    expect(got.distinct[ASSERTION_HEADER]).toEqual([got.headers[ASSERTION_HEADER]]);
    // Mounted at the service's root, as its own server would have it.
    expect(got.baseUrl).toBe("");
    expect(got.headers["x-forwarded-for"]).toBe("127.0.0.1");
    const requestId = res.headers.get("x-request-id")!;
    expect(got.headers["x-request-id"]).toBe(requestId);
    // The gateway's assertion, not the caller's forgery, and made for this request.
    const { principal } = await new InternalAssertions(secret).verify(String(got.headers[ASSERTION_HEADER]), {
      method: "POST",
      path: "/api/v1/llm/responses?x=1&y=%2F",
      requestId,
    });
    expect(principal).toMatchObject({ org: record.org, user: "alice", keyId: record.id });
    // Nothing the gateway kept for itself reaches the service but through the assertion.
    expect(got.locals).toEqual([]);
    const metrics = await (await gw.call("/metrics")).text();
    expect(metrics).toContain('route="/api/v1/llm/responses",status="201"');
  });

  it("hands over a body sent in chunks (no Content-Length) still framed as sent", async () => {
    const { secret: key } = await gw.createKey();
    const res = await new Promise<{ status?: number }>((resolve, reject) => {
      const req = request(
        `${gw.url}/api/v1/llm/conversations`,
        {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        },
        (answer) => {
          answer.resume();
          answer.on("end", () => resolve({ status: answer.statusCode }));
        },
      );
      req.on("error", reject);
      req.write('{"metadata":');
      req.end('{"topic":"chunks"}}');
    });
    expect(res.status).toBe(201);
    const got = handed.at(-1)!;
    expect(got.headers["transfer-encoding"]).toBe("chunked");
    expect(got.body).toBe('{"metadata":{"topic":"chunks"}}');
  });

  it("refuses before handing over: unauthenticated and over-quota requests never reach the service", async () => {
    const before = handed.length;
    expect((await gw.call("/api/v1/llm/things")).status).toBe(401);
    const { secret: key } = await gw.createKey({ limits: { minute: 1 } });
    expect((await gw.call("/api/v1/usage", { bearer: key })).status).toBe(201);
    expect((await gw.call("/api/v1/usage", { bearer: key })).status).toBe(429);
    expect(handed.length).toBe(before + 1);
  });

  it("lets the service see a caller that goes away mid-answer", async () => {
    const { secret: key } = await gw.createKey();
    const closed = once(aborted, "closed");
    await new Promise<void>((resolve, reject) => {
      const req = request(
        `${gw.url}/api/v1/llm/hold`,
        { headers: { authorization: `Bearer ${key}` } },
        (res) => {
          res.once("data", () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on("error", (err) => (err.message.includes("socket hang up") ? undefined : reject(err)));
      req.end();
    });
    const [finished] = await closed;
    expect(finished).toBe(false);
  });
});
