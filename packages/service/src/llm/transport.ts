import { injectTraceHeaders, type Span } from "@gw/core/tracing";
import { Agent } from "undici";
import { ProviderFailed, ProviderRateLimited, ProviderTimeout, redactProviderText } from "./errors.ts";

/**
 * The provider's HTTP transport: one POST to `/chat/completions` with its
 * deadline, bodies read within size limits, a stream's text read within the
 * deadline between reads. Failures are `ProviderError`s in the service's own
 * words (the provider's text, redacted, only as their detail).
 */

export interface TransportOptions {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  timeoutMs: number;
}

/** How much of an error body is read, for the log. */
const ERROR_BODY_BYTES = 4096;

/**
 * One connection pool per provider origin, kept warm: idle connections stay
 * open up to a minute (or what the provider's `Keep-Alive` allows) instead of
 * fetch's default 4 s, so a call after a quiet spell does not pay a new TCP
 * and TLS handshake. The version pinned is the one Node bundles for `fetch`.
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
export async function post(
  options: TransportOptions,
  body: Record<string, unknown>,
  signal: AbortSignal,
  /** The call's span: the provider gets it as its `traceparent` (the request's trace, from the client's). */
  span?: Span,
): Promise<Response> {
  let res: Response;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
  };
  injectTraceHeaders(headers, span);
  try {
    res = await within(
      fetch(`${options.baseUrl}/chat/completions`, {
        method: "POST",
        headers,
        dispatcher: poolOf(options.baseUrl!),
        body: JSON.stringify(body),
        signal,
      }),
      options.timeoutMs,
    );
  } catch (err) {
    if (err instanceof ProviderTimeout || signal.aborted) throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ProviderFailed("it could not be reached", {
      detail: redactProviderText(cause?.code ?? cause?.message ?? String(err), [options.apiKey]),
    });
  }
  if (res.ok) return res;
  const { text } = await within(readUpTo(res, ERROR_BODY_BYTES), options.timeoutMs).catch(() => ({
    text: "",
  }));
  if (res.status === 429)
    throw new ProviderRateLimited(res.headers.get("retry-after"), redactProviderText(text, [options.apiKey]));
  throw new ProviderFailed(`it answered HTTP ${res.status}`, {
    status: res.status,
    detail: redactProviderText(text, [options.apiKey]),
  });
}

/** The body as text, each read within the deadline. */
export async function* textOf(res: Response, timeoutMs: number): AsyncGenerator<string> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  while (true) {
    const { value, done } = await within(reader.read(), timeoutMs);
    if (done) break;
    yield decoder.decode(value, { stream: true });
  }
  yield decoder.decode();
}

/**
 * At most `maxBytes` of a body, as text; `whole` tells whether that was all
 * of it. A declared length over the limit is not read at all.
 */
export async function readUpTo(res: Response, maxBytes: number): Promise<{ text: string; whole: boolean }> {
  if (!res.body) return { text: "", whole: true };
  if (Number(res.headers.get("content-length")) > maxBytes) return { text: "", whole: false };
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    parts.push(r.value);
    size += r.value.byteLength;
    if (size > maxBytes) return { text: Buffer.concat(parts).toString("utf8", 0, maxBytes), whole: false };
  }
  return { text: Buffer.concat(parts).toString("utf8"), whole: true };
}

/** `promise`, or a `ProviderTimeout` once `ms` have passed (the caller then lets go of the connection). */
export function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProviderTimeout()), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
