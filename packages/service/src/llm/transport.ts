import { withDeadline } from "@gw/core/deadline";
import { discard } from "@gw/core/discard";
import { injectTraceHeaders, type Span } from "@gw/core/tracing";
import { atLeastChars, inTurn, LARGE_WORK_CHARS } from "@gw/core/turns";
import { Agent, type Dispatcher, request } from "undici";
import {
  ProviderError,
  ProviderFailed,
  ProviderRateLimited,
  ProviderTimeout,
  redactProviderText,
} from "./errors.ts";

/**
 * The providers' HTTP transport: one POST (to the endpoint a provider names
 * under its base URL, with the headers that carry its key) with its
 * deadline, bodies read within size limits, a stream's text read within the
 * deadline between reads. Failures are `ProviderError`s in the service's own
 * words (the provider's text, redacted, only as their detail). Each adapter
 * says where and with which credential headers (`llm/openai.ts`,
 * `llm/azure.ts`, `llm/anthropic.ts`).
 */

export interface TransportOptions {
  /** Where the provider's API is (`https://api.openai.com/v1`): an endpoint's path goes under it. */
  baseUrl: string | undefined;
  /** The key the call sends (its endpoint's headers carry it); replaced by `[redacted]` in whatever of the provider's text reaches the log. */
  apiKey: string | undefined;
  timeoutMs: number;
  /** Other values redacted likewise: every deployment's key (a provider may echo another's). */
  secrets?: readonly (string | undefined)[] | undefined;
  /**
   * The only dispatcher that may connect to `baseUrl` when an organization
   * typed it (its own key's `base_url`: each connection checked where it
   * resolves, llm/provider-keys.ts); unset: the origin's kept-warm pool.
   */
  dispatcher?: Dispatcher | undefined;
}

/** Where a call goes under the base URL, and the headers that carry its key. */
export interface Endpoint {
  path: string;
  headers: Record<string, string>;
}

/** OpenAI's chat completions: `/chat/completions`, the key as a bearer token. */
export const chatCompletions = (apiKey: string | undefined): Endpoint => ({
  path: "/chat/completions",
  headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
});

/** OpenAI's embeddings: `/embeddings`, the key as a bearer token. */
export const embeddingsEndpoint = (apiKey: string | undefined): Endpoint => ({
  path: "/embeddings",
  headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
});

/** The provider's answer as the transport hands it on: status, headers, and the body's bytes as they come. */
export interface ProviderResponse {
  status: number;
  headers: { get(name: string): string | null };
  /** Read at most once; breaking off a read lets go of the connection. */
  body: AsyncIterable<Uint8Array>;
  /** Lets go of the connection if the body was not read to its end (at once, even while a read waits). */
  close(): void;
}

/** How much of an error body is read, for the log. */
const ERROR_BODY_BYTES = 4096;

/**
 * One connection pool per provider origin, kept warm: idle connections stay
 * open up to a minute (or what the provider's `Keep-Alive` allows) instead of
 * fetch's default 4 s, so a call after a quiet spell does not pay a new TCP
 * and TLS handshake. Calls go through undici's `request` (not `fetch`: no
 * WHATWG streams, headers and `Response` per call, about a third of the
 * service's CPU for a model call under load, see BENCHMARKS.md).
 */
const pools = new Map<string, Agent>();
function poolOf(url: string): Agent {
  const origin = new URL(url).origin;
  let pool = pools.get(origin);
  if (!pool) {
    pool = new Agent({ keepAliveTimeout: 60_000, keepAliveMaxTimeout: 600_000 });
    pools.set(origin, pool);
  }
  return pool;
}

/** Sends the request; the deadline covers the wait for the answer to start. Non-2xx answers throw. */
/**
 * Why a provider call's own signal is aborted once the call is over: its
 * connection goes if its answer was not read whole, else nothing happens.
 * One reason for every call: `abort()` without one builds a DOMException,
 * stack trace and all, on every model call.
 */
export const CALL_OVER: DOMException = new DOMException("The provider call is over", "AbortError");

/**
 * `child` aborted with `parent`'s reason when `parent` aborts (at once if it has); returns what stops
 * following it. What `AbortSignal.any([parent, child.signal])` gives a call, without the dependent signal
 * that `any` makes and keeps by weak reference, with a finalizer, on every model call.
 */
export function followAbort(parent: AbortSignal, child: AbortController): () => void {
  if (parent.aborted) {
    child.abort(parent.reason);
    return () => undefined;
  }
  const follow = () => child.abort(parent.reason);
  parent.addEventListener("abort", follow, { once: true });
  return () => parent.removeEventListener("abort", follow);
}

/**
 * A provider call's own signal: aborted when `signal` aborts, and by `over` when the call ends (with
 * `CALL_OVER`: its connection goes if its answer was not read whole), which also stops following `signal`.
 */
export function callSignal(signal: AbortSignal): { signal: AbortSignal; over: () => void } {
  const call = new AbortController();
  const unfollow = followAbort(signal, call);
  return {
    signal: call.signal,
    over: () => {
      unfollow();
      call.abort(CALL_OVER);
    },
  };
}

export async function post(
  options: TransportOptions,
  body: Record<string, unknown>,
  signal: AbortSignal,
  /** The call's span: the provider gets it as its `traceparent` (the request's trace, from the client's). */
  span?: Span,
  endpoint: Endpoint = chatCompletions(options.apiKey),
): Promise<ProviderResponse> {
  const headers: Record<string, string> = { "content-type": "application/json", ...endpoint.headers };
  injectTraceHeaders(headers, span);
  // A large request is serialised, to its bytes, in a turn of its own, as a large body is parsed (`inTurn`).
  const payload = atLeastChars(body, LARGE_WORK_CHARS)
    ? await inTurn(() => Buffer.from(JSON.stringify(body)))
    : JSON.stringify(body);
  let answer: Awaited<ReturnType<typeof request>>;
  try {
    answer = await within(
      request(`${options.baseUrl}${endpoint.path}`, {
        method: "POST",
        headers,
        dispatcher: options.dispatcher ?? poolOf(options.baseUrl!),
        body: payload,
        signal,
      }),
      options.timeoutMs,
    );
  } catch (err) {
    if (err instanceof ProviderTimeout || signal.aborted) throw err;
    const cause = ((err as { cause?: unknown }).cause ?? err) as { code?: string; message?: string };
    throw new ProviderFailed("it could not be reached", {
      detail: redactProviderText(cause?.code ?? cause?.message ?? String(err), secretsOf(options)),
    });
  }
  const raw = answer.headers;
  const res: ProviderResponse = {
    status: answer.statusCode,
    headers: {
      get: (name) => {
        const value = raw[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
      },
    },
    body: answer.body,
    close: () => discard(answer.body),
  };
  if (res.status >= 200 && res.status < 300) return res;
  const { text } = await within(readUpTo(res, ERROR_BODY_BYTES), options.timeoutMs).catch(() => ({
    text: "",
  }));
  res.close(); // what was not read of an error's body
  if (res.status === 429)
    throw new ProviderRateLimited(
      res.headers.get("retry-after"),
      redactProviderText(text, secretsOf(options)),
    );
  throw new ProviderFailed(`it answered HTTP ${res.status}`, {
    status: res.status,
    detail: redactProviderText(text, secretsOf(options)),
  });
}

/** The body as text, each read within the deadline. */
export async function* textOf(res: ProviderResponse, timeoutMs: number): AsyncGenerator<string> {
  const reader = res.body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  try {
    while (true) {
      const { value, done } = await within(reader.next(), timeoutMs).catch(brokenOff);
      if (done) break;
      yield decoder.decode(value, { stream: true });
    }
    yield decoder.decode();
  } finally {
    res.close(); // the connection goes if the body was not read to its end
  }
}

/**
 * At most `maxBytes` of a body, as text; `whole` tells whether that was all
 * of it. A declared length over the limit is not read at all.
 */
export async function readUpTo(
  res: ProviderResponse,
  maxBytes: number,
): Promise<{ text: string; whole: boolean }> {
  if (Number(res.headers.get("content-length")) > maxBytes) return { text: "", whole: false };
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const part of res.body) {
      parts.push(part);
      size += part.byteLength;
      // Breaking off the loop lets go of the connection.
      if (size > maxBytes) return { text: Buffer.concat(parts).toString("utf8", 0, maxBytes), whole: false };
    }
  } catch (err) {
    return brokenOff(err);
  }
  return { text: Buffer.concat(parts).toString("utf8"), whole: true };
}

/** A read that failed midway (the connection closed or reset during the answer) is the provider's failure. */
function brokenOff(err: unknown): never {
  if (err instanceof ProviderError) throw err;
  const code = (err as { code?: unknown } | undefined)?.code;
  throw new ProviderFailed("its answer broke off", {
    detail: typeof code === "string" ? code : (err as Error | undefined)?.name,
  });
}

/** What is redacted from the provider's text: the call's key and the other secrets it was given. */
const secretsOf = (options: TransportOptions): (string | undefined)[] => [
  options.apiKey,
  ...(options.secrets ?? []),
];

/** `promise`, or a `ProviderTimeout` once `ms` have passed (the caller then lets go of the connection). */
export const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  withDeadline(promise, ms, () => new ProviderTimeout());
