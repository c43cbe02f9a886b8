import { Agent, type IncomingMessage, request, type ServerResponse } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { AppError } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import type { Logger } from "@gw/core/logger";
import { endSpan, injectTraceHeaders, type Span, startClientSpan } from "@gw/core/tracing";
import type { Request, RequestHandler, Response } from "express";

/** What the caller sent that the service must never see: its credentials, and any assertion of its own. */
const CALLER_CREDENTIALS = new Set(["authorization", "x-on-behalf-of", ASSERTION_HEADER]);
/** Hop-by-hop headers (RFC 9110 §7.6.1) and the caller's credentials never cross to the service. */
const DROPPED_REQUEST_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  ...CALLER_CREDENTIALS,
]);
const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "trailer",
  "upgrade",
]);

/** The service's application, for a gateway that runs it in its own process (`@gw/gateway-with-service`). */
export type ServiceHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ForwardOptions {
  serviceUrl: string;
  /**
   * The service in this process: requests are handed to it, with the same
   * assertion, instead of sent to `serviceUrl` (docs/adr/0026-service-in-the-gateways-process.md).
   */
  inProcess?: ServiceHandler;
  assertions: InternalAssertions;
  /** Time allowed until the service's response headers arrive. */
  timeoutMs: number;
  /** After the headers, the longest the connection to the service may carry no bytes before the answer is ended. */
  idleTimeoutMs: number;
  logger: Logger;
}

/**
 * Step 5: everything under `/api/v1` the gateway does not serve goes to the
 * service, after authentication, principal and rate limit. Bodies stream
 * both ways unbuffered (SSE included); the caller's credentials stay here and
 * the service gets a short-lived assertion of the principal, bound to this
 * request. A service that is down answers 502, one that does not answer in
 * time 504; one that stalls mid-answer has the answer cut after the idle
 * timeout; a caller that goes away cancels the service's work.
 */
export function forward(options: ForwardOptions): RequestHandler {
  if (options.inProcess) return handOver(options, options.inProcess);
  const base = new URL(options.serviceUrl);
  const secure = base.protocol === "https:";
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new Agent({ keepAlive: true });
  const send = secure ? httpsRequest : request;

  return async (req, res, next) => {
    const path = req.originalUrl;
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !DROPPED_REQUEST_HEADERS.has(name)) headers[name] = value;
    }
    const { headers: told, span: hop } = await startHop(options, req, res);
    Object.assign(headers, told);

    let answered = false;
    let callerGone = false;
    // Set when the gateway itself ends the answer (a broken or stalled service), so a close is not taken for the caller's.
    let endedHere = false;
    const endHere = () => {
      endedHere = true;
      res.destroy();
    };
    // The path goes on exactly as received (and as the assertion names it): never re-parsed or normalised.
    const upstream = send(
      {
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path,
        method: req.method,
        headers,
        agent,
        timeout: options.timeoutMs,
      },
      (upstreamRes) => {
        answered = true;
        // The socket's idle timer: no bytes either way for this long (a stalled service, or a caller
        // that stopped reading and so paused us) ends both sides.
        upstream.setTimeout(options.idleTimeoutMs);
        res.status(upstreamRes.statusCode ?? 502);
        for (const [name, value] of Object.entries(upstreamRes.headers)) {
          if (value !== undefined && !DROPPED_RESPONSE_HEADERS.has(name) && name !== "x-request-id") {
            res.setHeader(name, value);
          }
        }
        // An answer of unknown length (a stream) shows its headers at once; one of known length (JSON) sends
        // them with its body: one write, not two.
        if (upstreamRes.headers["content-length"] === undefined) res.flushHeaders();
        upstreamRes.pipe(res);
        upstreamRes.on("error", (err) => {
          endSpan(hop, err);
          endHere();
        });
        upstreamRes.on("end", () =>
          endSpan(hop, undefined, { "http.response.status_code": upstreamRes.statusCode ?? 0 }),
        );
      },
    );
    upstream.on("timeout", () => {
      if (answered) options.logger.warn({ requestId: req.id }, "service answer stalled; ended");
      upstream.destroy(new AppError("gateway_timeout", "The service did not answer in time"));
    });
    upstream.on("error", (err) => {
      if (!answered) endSpan(hop, err);
      if (answered || res.headersSent) {
        endHere();
        return;
      }
      if (err instanceof AppError) return next(err);
      if (callerGone) return;
      options.logger.warn({ requestId: req.id, err: err.message }, "service unreachable");
      next(new AppError("bad_gateway", "The service is unreachable", { cause: err }));
    });
    // The caller went away: stop the service's work (and any model call behind it).
    res.on("close", () => {
      if (res.writableFinished || endedHere) return;
      callerGone = true;
      // Nobody to answer: not a fault of the gateway or the service (docs/operations.md, "Client aborts").
      options.logger.info({ requestId: req.id }, "client closed the request");
      upstream.destroy();
    });
    req.pipe(upstream);
  };
}

/**
 * The hop to the service, over HTTP or handed over, and what the gateway tells the service of the
 * request: the assertion of its principal, made for exactly this request (method, path as received,
 * request id), the request id, the caller's address, and the trace, whose span for the hop (ended by
 * the caller) is the service's parent.
 */
async function startHop(
  options: ForwardOptions,
  req: Request,
  res: Response,
): Promise<{ headers: Record<string, string>; span: Span | undefined }> {
  const assertion = await options.assertions.sign(
    principalOf(res),
    { method: req.method, path: req.originalUrl, requestId: req.id },
    res.locals.admission,
  );
  const headers = { [ASSERTION_HEADER]: assertion, "x-request-id": req.id, "x-forwarded-for": req.ip ?? "" };
  const span = startClientSpan("forward to service", { "http.request.method": req.method });
  injectTraceHeaders(headers, span);
  return { headers, span };
}

/** Headers the hand-over sets as the hop would (the trace's only while tracing is on). */
const SET_BY_THE_HOP = ["x-request-id", "x-forwarded-for", "traceparent", "tracestate", "baggage"];

/**
 * The service in the gateway's process: the request goes on to the service's
 * application as it is, its body unread (and still framed as sent: chunked or
 * of a stated length), with what the hop would give it (the assertion, the
 * request id, the caller's address, the trace) and without the caller's
 * credentials, in `headers`, `rawHeaders` and `headersDistinct` alike; the
 * service answers on the caller's own connection. So the service's door
 * (ADR 0006) is the same one: it verifies the assertion and records it
 * against replay, as behind a hop. The service starts with locals of its own:
 * nothing the gateway kept reaches it but through the assertion.
 */
function handOver(options: ForwardOptions, service: ServiceHandler): RequestHandler {
  return async (req, res) => {
    const { headers: told, span } = await startHop(options, req, res);
    for (const name of CALLER_CREDENTIALS) delete req.headers[name];
    Object.assign(req.headers, told);
    // The raw list as `headers` now has it: the caller's credentials out, what the hop sets in.
    const raw: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i] as string;
      const lower = name.toLowerCase();
      if (!CALLER_CREDENTIALS.has(lower) && !SET_BY_THE_HOP.includes(lower))
        raw.push(name, req.rawHeaders[i + 1] as string);
    }
    for (const name of [ASSERTION_HEADER, ...SET_BY_THE_HOP]) {
      const value = req.headers[name];
      if (typeof value === "string") raw.push(name, value);
    }
    req.rawHeaders.splice(0, req.rawHeaders.length, ...raw);
    // Node keeps what it first computed (the gateway read it while authenticating): computed again here.
    Object.defineProperty(req, "headersDistinct", { value: distinct(raw), configurable: true });
    let endedByService = false;
    const destroy = res.destroy.bind(res);
    res.destroy = (err?: Error) => {
      endedByService = true;
      return destroy(err);
    };
    res.once("close", () => {
      const callerGone = !res.writableFinished && !endedByService;
      endSpan(span, callerGone ? "the caller went away" : undefined, {
        "http.response.status_code": res.statusCode,
      });
      // As behind a hop: the service logs it too, and stops its work (it holds the same connection).
      if (callerGone) options.logger.info({ requestId: req.id }, "client closed the request");
    });
    // The path exactly as received (and as the assertion names it), from the service's root.
    req.url = req.originalUrl;
    req.baseUrl = "";
    res.locals = Object.create(null);
    service(req, res);
  };
}

/** `headersDistinct` of a raw header list: lower-case names, every value of each. */
function distinct(raw: readonly string[]): Record<string, string[]> {
  const headers: Record<string, string[]> = Object.create(null);
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const values = headers[name] ?? [];
    values.push(raw[i + 1] as string);
    headers[name] = values;
  }
  return headers;
}
