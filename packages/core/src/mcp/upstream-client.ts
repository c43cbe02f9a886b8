import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  CallToolResultSchema,
  ListToolsResultSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { createParser } from "eventsource-parser";
import { LRUCache } from "lru-cache";
import { type Agent, fetch as undiciFetch } from "undici";
import type { z } from "zod";
import { entryBound } from "../bounded-cache.ts";
import { discard } from "../discard.ts";
import { AppError, type ErrorCause } from "../errors.ts";
import type { Logger } from "../logger.ts";
import { AnswerTooLarge, boundedResponse } from "./bounded-body.ts";
import type { UpstreamHeaders } from "./credentials.ts";
import { encodeHeaderValue, gatewayRequestMeta, MODERN_PROTOCOL_VERSIONS } from "./protocol-eras.ts";
import { type UpstreamPolicy, UpstreamRefused } from "./upstream-address.ts";

/** The server a session talks to. */
export interface UpstreamTarget {
  id: string;
  name: string;
  url: string;
}

/** Whose session it is: upstream sessions are never shared between principals. */
export interface SessionOwner {
  org: string;
  user: string;
  /**
   * What else the session's requests act with, when that is more than the
   * user (the whole asserted principal of a hosted tool's call): sessions
   * are kept apart per value.
   */
  credential?: string;
}

/** Headers made for one HTTP request of a call (an assertion bound to its method and path). */
export type RequestSigner = (request: { method: string; url: URL }) => Promise<UpstreamHeaders>;

/** How one call is made beyond its credential headers. */
export interface CallOptions {
  /** Ends the call when aborted (its caller went away). */
  signal?: AbortSignal;
  /** Headers added to each HTTP request of the call, made for that request. */
  signRequest?: RequestSigner;
}

export type UpstreamFailure =
  | "timeout"
  | "unreachable"
  | "refused"
  | "status"
  | "protocol"
  | "jsonrpc"
  | "too_large"
  | "too_many_tools";

/** A limit an upstream's answer ran into (each counted by the caller's `onLimit`). */
export type UpstreamLimit = "answer_bytes" | "tools_per_server" | "tool_name" | "new_tools_per_listing";
export const UPSTREAM_LIMITS: readonly UpstreamLimit[] = [
  "answer_bytes",
  "tools_per_server",
  "tool_name",
  "new_tools_per_listing",
];

const CAUSES: Record<UpstreamFailure, ErrorCause> = {
  timeout: "mcp_upstream_timeout",
  too_large: "mcp_answer_too_large",
  too_many_tools: "mcp_too_many_tools",
  unreachable: "mcp_upstream_failed",
  refused: "mcp_upstream_failed",
  status: "mcp_upstream_failed",
  protocol: "mcp_upstream_failed",
  jsonrpc: "mcp_upstream_failed",
};

/**
 * An upstream that failed, stalled, answered garbage or more than its limits
 * allow. Its message names the server and what went wrong, never the
 * upstream's body; the proxy answers it as a JSON-RPC error with `rpcCode`,
 * a route as the catalogue's 502 (504 when it did not answer in time).
 */
export class UpstreamError extends AppError {
  readonly failure: UpstreamFailure;
  readonly rpcCode: number;
  /** The HTTP status the upstream refused with, when it did (`status`, or a JSON-RPC error sent with one). */
  readonly httpStatus: number | undefined;
  /** A JSON-RPC error's own message (credentials redacted), when the upstream answered one. */
  readonly rpcMessage: string | undefined;

  constructor(
    server: UpstreamTarget,
    failure: UpstreamFailure,
    detail: string,
    rpcCode = -32603,
    answered: { httpStatus?: number | undefined; rpcMessage?: string | undefined } = {},
  ) {
    super(
      failure === "timeout" ? "gateway_timeout" : "bad_gateway",
      `MCP server '${server.name}' (${server.id}) ${detail}`,
      { reason: CAUSES[failure] },
    );
    this.name = "UpstreamError";
    this.failure = failure;
    this.rpcCode = rpcCode;
    this.httpStatus = answered.httpStatus;
    this.rpcMessage = answered.rpcMessage;
  }
}

interface Session {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The credential headers of the call under way (set for each call, after its check). */
  headers: UpstreamHeaders;
  /** The call under way's signer of each request, if it has one. */
  signRequest: RequestSigner | undefined;
  ready: Promise<void>;
  /** Set when an answer went past `MCP_MAX_ANSWER_BYTES`: the session was closed for it. */
  tooLarge?: AnswerTooLarge;
}

export interface UpstreamClientsOptions {
  policy: UpstreamPolicy;
  /** Deadline of one upstream request, in milliseconds (`MCP_UPSTREAM_TIMEOUT_MS`). */
  timeoutMs: number;
  /** Bytes of one upstream answer (JSON or SSE), and of one listing's pages together (`MCP_MAX_ANSWER_BYTES`). */
  maxAnswerBytes: number;
  /** Tools one listing may offer (`MCP_MAX_TOOLS_PER_SERVER`); more is refused. */
  maxTools: number;
  /** Told of each answer cut or listing refused by a limit. */
  onLimit?: (limit: UpstreamLimit) => void;
  /** Upstream sessions kept open (least recently used closed first). */
  maxSessions?: number;
  logger?: Logger;
}

/** One request to an upstream, whatever its era, its result read by `schema`. */
type Requester = <S extends z.ZodType>(
  method: string,
  params: Record<string, unknown>,
  schema: S,
) => Promise<z.infer<S>>;

/** Headers a stored credential may never set: the transport's own. */
const TRANSPORT_HEADERS = new Set([
  "accept",
  "content-type",
  "content-length",
  "host",
  "connection",
  "transfer-encoding",
  "mcp-session-id",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
  "last-event-id",
]);

/**
 * MCP clients of the upstream servers (the SDK's Streamable HTTP client),
 * one session per principal and server, kept while used. Every request goes
 * through the upstream policy's dispatcher, so each new connection is
 * checked and pinned to the address checked; redirects are never followed;
 * only the vault's headers for this call are added, never the caller's own
 * credential. Every answer is read through a byte limit: past it the
 * connection is dropped, the session closed, and its calls fail.
 */
export class UpstreamClients {
  /** The least recently used session makes room for one more, and is closed rather than left open upstream. */
  private readonly sessions: LRUCache<string, Session>;
  private readonly dispatcher: Agent;
  private readonly timeoutMs: number;
  private readonly logger: Logger | undefined;
  private readonly maxSessions: number;
  private readonly maxAnswerBytes: number;
  private readonly maxTools: number;
  private readonly onLimit: (limit: UpstreamLimit) => void;
  /** Servers (id and URL) found to speak the modern era, and the version they speak. */
  private readonly modern = new LRUCache<string, string>(entryBound(10_000));
  private requestIds = 0;

  constructor(options: UpstreamClientsOptions) {
    this.timeoutMs = options.timeoutMs;
    this.maxAnswerBytes = options.maxAnswerBytes;
    this.maxTools = options.maxTools;
    this.onLimit = options.onLimit ?? (() => undefined);
    this.logger = options.logger;
    this.maxSessions = options.maxSessions ?? 1_000;
    this.sessions = new LRUCache({
      ...entryBound(this.maxSessions),
      dispose: (session, _key, reason) => {
        if (reason === "evict") session.client.close().catch(() => undefined);
      },
    });
    this.dispatcher = options.policy.dispatcher(options.timeoutMs);
  }

  /**
   * Every tool the upstream offers (all pages): refused when it offers more
   * than `maxTools`, or its pages together hold more than `maxAnswerBytes`.
   */
  async listTools(
    owner: SessionOwner,
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions = {},
  ): Promise<Tool[]> {
    return this.run(owner, server, headers, options, async (request) => {
      const tools: Tool[] = [];
      let bytes = 0;
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const result = await request("tools/list", cursor ? { cursor } : {}, ListToolsResultSchema);
        tools.push(...result.tools);
        if (tools.length > this.maxTools) {
          this.onLimit("tools_per_server");
          throw new UpstreamError(
            server,
            "too_many_tools",
            `offers more than ${this.maxTools} tools (MCP_MAX_TOOLS_PER_SERVER)`,
          );
        }
        // Each page is bounded on the wire; many pages are bounded together.
        bytes += Buffer.byteLength(JSON.stringify(result.tools));
        if (bytes > this.maxAnswerBytes) {
          this.onLimit("answer_bytes");
          throw new UpstreamError(server, "too_large", new AnswerTooLarge(this.maxAnswerBytes).message);
        }
        cursor = result.nextCursor;
        if (!cursor) break;
      }
      return tools;
    });
  }

  async callTool(
    owner: SessionOwner,
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    params: { name: string; arguments?: Record<string, unknown> | undefined },
    options: CallOptions = {},
  ): Promise<CallToolResult> {
    return this.run(owner, server, headers, options, (request) =>
      request("tools/call", params, CallToolResultSchema),
    ) as Promise<CallToolResult>;
  }

  /** Closes the sessions of a server (deleted, or its URL changed). */
  async forgetServer(serverId: string): Promise<void> {
    for (const key of [...this.modern.keys()])
      if (key.startsWith(`${serverId}\u0000`)) this.modern.delete(key);
    const doomed = [...this.sessions.entries()].filter(([key]) => key.endsWith(`\u0000${serverId}`));
    for (const [key, session] of doomed) {
      this.sessions.delete(key);
      await session.client.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.client.close().catch(() => undefined)));
    await this.dispatcher.close().catch(() => undefined);
  }

  /**
   * Runs `work` against the upstream in its era (ADR 0024). A server is
   * first spoken to as a legacy one (an `initialize` session per principal):
   * one that refuses the handshake with HTTP 400 and answers
   * `server/discover` with 2026-07-28 among its versions is modern, and
   * from then on gets stateless requests with `_meta` and the mirrored
   * headers, known as such per server and URL.
   */
  private async run<T>(
    owner: SessionOwner,
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions,
    work: (request: Requester) => Promise<T>,
  ): Promise<T> {
    const eraKey = `${server.id}\u0000${server.url}`;
    const modern = this.modern.get(eraKey);
    if (modern) return this.runModern(server, headers, options, modern, work);
    const key = [owner.org, owner.user, owner.credential ?? "", server.url, server.id].join("\u0000");
    for (let attempt = 0; ; attempt++) {
      const session = this.session(key, server);
      session.headers = headers;
      session.signRequest = options.signRequest;
      try {
        await session.ready;
      } catch (err) {
        this.drop(key, session);
        if (err instanceof StreamableHTTPError && err.code === 400) {
          const version = await this.discoverModern(server, headers, options);
          if (version) {
            this.modern.set(eraKey, version);
            return this.runModern(server, headers, options, version, work);
          }
        }
        if (session.tooLarge) throw new UpstreamError(server, "too_large", session.tooLarge.message);
        throw this.failure(server, err, headers);
      }
      try {
        // The handshake was the SDK's; each request of the session is then one HTTP request made
        // here, with the session's id and version (a tenth of the SDK client's work per call).
        return await work((method, params, schema) =>
          this.directRequest(server, headers, options, this.sessionHeaders(session), method, params).then(
            (result) => schema.parse(result) as z.infer<typeof schema>,
          ),
        );
      } catch (err) {
        // An answer refused here (too many tools) leaves the session as it was, and the calls sharing it.
        if (err instanceof UpstreamError && !session.tooLarge) throw err;
        // The session is of no more use: a fresh one next time (once more now if the upstream forgot it).
        this.drop(key, session);
        if (session.tooLarge) throw new UpstreamError(server, "too_large", session.tooLarge.message);
        // A 404 to a request with a session id: the upstream forgot the session (it restarted, say),
        // whether its answer has a JSON-RPC error or none (MCP's transport: start a new session).
        const forgotten = httpStatusOf(err) === 404 && attempt === 0;
        if (forgotten) continue;
        throw this.failure(server, err, headers);
      }
    }
  }

  private async runModern<T>(
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions,
    version: string,
    work: (request: Requester) => Promise<T>,
  ): Promise<T> {
    try {
      return await work((method, params, schema) =>
        this.modernRequest(server, headers, options, version, method, params).then(
          (r) => schema.parse(r) as z.infer<typeof schema>,
        ),
      );
    } catch (err) {
      throw this.failure(server, err, headers);
    }
  }

  /** The modern version an upstream that refused the handshake speaks, if it answers `server/discover` with one. */
  private async discoverModern(
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions,
  ): Promise<string | undefined> {
    for (const version of MODERN_PROTOCOL_VERSIONS) {
      try {
        const result = (await this.modernRequest(
          server,
          headers,
          options,
          version,
          "server/discover",
          {},
        )) as {
          supportedVersions?: unknown;
        };
        if (Array.isArray(result?.supportedVersions) && result.supportedVersions.includes(version))
          return version;
      } catch {
        // Not a modern server either: the handshake's failure is what the caller is told.
      }
    }
    return undefined;
  }

  /**
   * One stateless request of the modern era: its version and the gateway's
   * (empty) capabilities in `_meta`, its method and name mirrored in the
   * headers the specification requires, through the same guard as a
   * session's (origin, policy dispatcher, no redirects, bounded answer).
   * Answered as JSON or as an SSE stream whose last message for this id is
   * the response.
   */
  private async modernRequest(
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions,
    version: string,
    method: string,
    params: Record<string, unknown>,
  ): Promise<unknown> {
    const name = method === "tools/call" ? params.name : undefined;
    const eraHeaders: Record<string, string> = {
      "mcp-protocol-version": version,
      "mcp-method": method,
      ...(typeof name === "string" ? { "mcp-name": encodeHeaderValue(name) } : {}),
    };
    return this.directRequest(server, headers, options, eraHeaders, method, {
      ...params,
      _meta: gatewayRequestMeta(version),
    });
  }

  /** What a request of a legacy session carries: its id and the version its handshake agreed. */
  private sessionHeaders(session: Session): Record<string, string> {
    const { sessionId, protocolVersion } = session.transport;
    return {
      ...(sessionId ? { "mcp-session-id": sessionId } : {}),
      ...(protocolVersion ? { "mcp-protocol-version": protocolVersion } : {}),
    };
  }

  /**
   * One JSON-RPC request as one HTTP POST, through the same guard as every
   * request to the server (its origin only, the policy's dispatcher, no
   * redirects, the answer read within `maxAnswerBytes`), with `eraHeaders`
   * (a session's id, or the modern era's mirrored headers). Answered as
   * JSON or as an SSE stream whose message with this request's id is the
   * response. The result, or the JSON-RPC error as an `McpError`; an HTTP
   * refusal without one is a `StreamableHTTPError` with its status.
   */
  private async directRequest(
    server: UpstreamTarget,
    headers: UpstreamHeaders,
    options: CallOptions,
    eraHeaders: Record<string, string>,
    method: string,
    params: Record<string, unknown>,
  ): Promise<unknown> {
    // A string id of the gateway's own: never one the SDK client of the same session uses.
    const id = `gw-${++this.requestIds}`;
    const url = new URL(server.url);
    const requestHeaders = await callHeaders(headers, options.signRequest, "POST", url);
    Object.assign(requestHeaders, eraHeaders, {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    });
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const {
      statusCode,
      headers: answered,
      body,
    } = await this.dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: "POST",
      headers: requestHeaders,
      body: JSON.stringify({ jsonrpc: "2.0", id, method, params }),
      signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
    });
    if (statusCode >= 300 && statusCode < 400) {
      discard(body);
      throw new UpstreamRefused("it answered with a redirect, which the gateway does not follow");
    }
    const ok = statusCode >= 200 && statusCode < 300;
    const type = String(answered["content-type"] ?? "");
    let message: unknown;
    try {
      message =
        type.startsWith("text/event-stream") && ok
          ? await this.readEvents(body, id)
          : JSON.parse(await this.readText(body));
    } catch (err) {
      if (err instanceof AnswerTooLarge || !(err instanceof SyntaxError)) throw err;
      if (!ok) throw new StreamableHTTPError(statusCode, "answered a non-JSON error");
      throw new Error("the answer is not JSON");
    }
    const rpc = message as { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
    if (rpc?.error && typeof rpc.error.code === "number") {
      const error = new McpError(rpc.error.code, String(rpc.error.message ?? ""));
      // A refusal (401, 403) may carry a JSON-RPC error too: its status is kept with it.
      throw ok ? error : Object.assign(error, { httpStatus: statusCode });
    }
    if (!ok) throw new StreamableHTTPError(statusCode, "answered an error");
    if (!rpc || rpc.id !== id || rpc.result === undefined)
      throw new Error("the answer is not a JSON-RPC response");
    return rpc.result;
  }

  /** A body as text, read within `maxAnswerBytes` (past it: dropped, counted, `AnswerTooLarge`). */
  private async readText(body: Readable): Promise<string> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of body) {
      bytes += chunk.byteLength;
      if (bytes > this.maxAnswerBytes) throw this.cutOff(body);
      chunks.push(chunk);
    }
    return Buffer.concat(chunks).toString("utf8");
  }

  /**
   * The message with `id` of an SSE stream (other messages, such as
   * notifications, are passed over), read within `maxAnswerBytes`. What
   * follows it is read to the end and dropped, not waited for, so that the
   * connection can serve the next request (still within the limit, and the
   * dispatcher's body timeout).
   */
  private readEvents(body: Readable, id: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        fn();
      };
      const decoder = new StringDecoder("utf8");
      const parser = createParser({
        onEvent: (event) => {
          if (settled) return;
          try {
            const parsed = JSON.parse(event.data) as { id?: unknown };
            if (parsed && parsed.id === id) settle(() => resolve(parsed));
          } catch (err) {
            settle(() => reject(err));
          }
        },
      });
      let bytes = 0;
      body.on("data", (chunk: Buffer) => {
        bytes += chunk.byteLength;
        if (bytes > this.maxAnswerBytes) {
          if (settled) discard(body);
          else settle(() => reject(this.cutOff(body)));
          return;
        }
        if (!settled) parser.feed(decoder.write(chunk));
      });
      body.on("end", () => settle(() => reject(new Error("the event stream ended without the response"))));
      body.on("error", (err) => settle(() => reject(err)));
    });
  }

  private cutOff(body: Readable): AnswerTooLarge {
    discard(body);
    this.onLimit("answer_bytes");
    return new AnswerTooLarge(this.maxAnswerBytes);
  }

  /** Closes a session and forgets it, unless another has taken its place meanwhile. */
  private drop(key: string, session: Session): void {
    if (this.sessions.peek(key) === session) this.sessions.delete(key);
    session.client.close().catch(() => undefined);
  }

  private session(key: string, server: UpstreamTarget): Session {
    const existing = this.sessions.get(key);
    if (existing) return existing;
    const session = {} as Session;
    session.headers = {};
    const guardedFetch = this.guardedFetch(
      server,
      () => ({ headers: session.headers, signRequest: session.signRequest }),
      (err) => {
        if (session.tooLarge) return;
        session.tooLarge = err;
        this.onLimit("answer_bytes");
        queueMicrotask(() => this.drop(key, session));
      },
    );
    session.transport = new StreamableHTTPClientTransport(new URL(server.url), { fetch: guardedFetch });
    session.client = new Client({ name: "llm-authz-gateway", version: "0.1.0" }, { capabilities: {} });
    session.client.onerror = (err) =>
      this.logger?.debug({ err: err.message, server: server.id }, "upstream MCP session error");
    session.ready = session.client.connect(session.transport, { timeout: this.timeoutMs });
    session.ready.catch(() => undefined);
    this.sessions.set(key, session);
    return session;
  }

  /**
   * `fetch` to one server only: the credential is bound to its origin; the
   * policy's dispatcher checks and pins each connection; a redirect is
   * refused; the answer is read within `maxAnswerBytes` (`tooLarge` is told).
   */
  private guardedFetch(
    server: UpstreamTarget,
    credential: () => { headers: UpstreamHeaders; signRequest: RequestSigner | undefined },
    tooLarge: (err: AnswerTooLarge) => void,
  ): (input: string | URL, init?: RequestInit) => Promise<Response> {
    const origin = new URL(server.url).origin;
    const dispatcher = this.dispatcher;
    return async (input, init) => {
      const url = new URL(input instanceof URL ? input.href : String(input));
      // The credential is bound to the server's origin: nothing goes anywhere else.
      if (url.origin !== origin) throw new UpstreamRefused("a request left the server's origin");
      const merged = new Headers(init?.headers);
      const { headers, signRequest } = credential();
      const added = await callHeaders(headers, signRequest, init?.method ?? "GET", url);
      for (const [name, value] of Object.entries(added)) merged.set(name, value);
      const response = await undiciFetch(url, {
        ...(init as Record<string, unknown>),
        headers: Object.fromEntries(merged),
        redirect: "manual",
        dispatcher,
      } as unknown as Parameters<typeof undiciFetch>[1]);
      if (response.status >= 300 && response.status < 400) {
        await response.body?.cancel().catch(() => undefined);
        throw new UpstreamRefused("it answered with a redirect, which the gateway does not follow");
      }
      // Past the limit the upstream's connection is dropped (and a session closed, which fails every
      // call waiting on it at once: an SSE answer is read apart from its call, which would wait on).
      return boundedResponse(response as unknown as Response, this.maxAnswerBytes, tooLarge);
    };
  }

  /** What the caller is told of an upstream failure: the server and the kind, never its body or a secret. */
  private failure(server: UpstreamTarget, err: unknown, headers: UpstreamHeaders): UpstreamError {
    if (err instanceof UpstreamError) return err;
    const tooLarge = findCause(err, (e) => e instanceof AnswerTooLarge);
    if (tooLarge) return new UpstreamError(server, "too_large", tooLarge.message);
    const refused = findCause(err, (e) => e instanceof UpstreamRefused) as UpstreamRefused | undefined;
    if (refused) return new UpstreamError(server, "refused", `was refused: ${refused.message}`);
    if (err instanceof McpError) {
      if (err.code === -32001)
        return new UpstreamError(server, "timeout", `did not answer within ${this.timeoutMs} ms`);
      if (err.code === -32000) return new UpstreamError(server, "unreachable", "closed the connection");
      const message = redact(String(err.message).replace(/^MCP error -?\d+: /, ""), headers);
      return new UpstreamError(
        server,
        "jsonrpc",
        `answered with an error: ${message.slice(0, 200)}`,
        err.code,
        {
          httpStatus: (err as { httpStatus?: number }).httpStatus,
          rpcMessage: message,
        },
      );
    }
    if (err instanceof StreamableHTTPError) {
      return new UpstreamError(server, "status", `answered HTTP ${err.code ?? "error"}`, -32603, {
        httpStatus: err.code,
      });
    }
    const timedOut = findCause(err, (e) => /Timeout|ETIMEDOUT|aborted/i.test(`${e.name} ${codeOf(e)}`));
    if (timedOut) return new UpstreamError(server, "timeout", `did not answer within ${this.timeoutMs} ms`);
    const network = findCause(err, (e) => /^E[A-Z]+/.test(codeOf(e)) || e.message === "fetch failed");
    if (network) return new UpstreamError(server, "unreachable", "could not be reached");
    this.logger?.debug({ err: (err as Error)?.message, server: server.id }, "upstream MCP answer refused");
    return new UpstreamError(server, "protocol", "answered with something that is not MCP");
  }
}

/**
 * What a call adds to one HTTP request: its credential's headers and those
 * signed for this request, lower-cased, never one of the transport's own.
 */
async function callHeaders(
  headers: UpstreamHeaders,
  signRequest: RequestSigner | undefined,
  method: string,
  url: URL,
): Promise<Record<string, string>> {
  const signed = signRequest ? await signRequest({ method, url }) : {};
  const out: Record<string, string> = {};
  for (const [name, value] of [...Object.entries(headers), ...Object.entries(signed)])
    if (!TRANSPORT_HEADERS.has(name.toLowerCase())) out[name.toLowerCase()] = value;
  return out;
}

const codeOf = (e: Error) => String((e as { code?: unknown }).code ?? "");

function findCause(err: unknown, test: (e: Error) => boolean): Error | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 6; e = e.cause, depth++) if (test(e)) return e;
  return undefined;
}

/** The upstream may echo what it was sent: a credential's value never passes on. */
function redact(text: string, headers: UpstreamHeaders): string {
  let out = text;
  for (const value of Object.values(headers)) {
    for (const part of [value, value.replace(/^Bearer /, "")])
      if (part.length >= 4) out = out.split(part).join("[redacted]");
  }
  return out;
}

/** The HTTP status an upstream's refusal came with: a transport error's, or one kept with a JSON-RPC error. */
function httpStatusOf(err: unknown): number | undefined {
  if (err instanceof StreamableHTTPError) return err.code;
  const status = (err as { httpStatus?: unknown } | null)?.httpStatus;
  return typeof status === "number" ? status : undefined;
}
