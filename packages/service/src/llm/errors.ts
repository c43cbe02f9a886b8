import { AppError, cutText, type ErrorCause, type ErrorCode } from "@gw/core/errors";

/**
 * Why the model could not answer, with its catalogue code. The message is in
 * the service's own words only: what the provider said (its status, its body
 * redacted and cut short) stays in `providerStatus` and `providerDetail`,
 * which reach the log with the request id, never a client.
 */
export class ProviderError extends AppError {
  readonly providerStatus: number | undefined;
  readonly providerDetail: string | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      status?: number;
      detail?: string;
      headers?: Record<string, string>;
      cause?: unknown;
      rateLimit?: boolean;
      reason?: ErrorCause;
    } = {},
  ) {
    super(code, message, {
      headers: options.headers,
      cause: options.cause,
      rateLimit: options.rateLimit,
      ...(options.reason ? { reason: options.reason } : {}),
    });
    this.name = new.target.name;
    this.providerStatus = options.status;
    this.providerDetail = options.detail;
  }
}

export class ProviderNotConfigured extends ProviderError {
  constructor(variable: string) {
    super("service_unavailable", `No model provider is configured: set ${variable}`);
  }
}

/**
 * No deployment of a model (nor of its fallbacks) could be tried: each
 * cools down after failures, or waits on another call's probe, or needs the
 * organization's own provider key, which it has none of. `retryAfterSeconds`:
 * when the first of them is back.
 */
export class ModelUnavailable extends ProviderError {
  constructor(model: string, retryAfterSeconds: number | undefined) {
    super(
      "service_unavailable",
      `No deployment of the model '${model}' can take calls now${retryAfterSeconds ? `; try again in ${retryAfterSeconds} s` : ""}`,
      {
        reason: "model_unavailable",
        ...(retryAfterSeconds ? { headers: { "Retry-After": String(retryAfterSeconds) } } : {}),
      },
    );
  }
}

export class ProviderTimeout extends ProviderError {
  constructor() {
    super("gateway_timeout", "The model provider did not answer in time");
  }
}

/**
 * The provider's own 429, passed on as a 429 with its `Retry-After`, in
 * OpenAI's error shape (`rate_limit_error`): not the key's quota, whose 429
 * comes before the model is reached and keeps the contract's body.
 */
export class ProviderRateLimited extends ProviderError {
  constructor(retryAfter: string | null, detail: string) {
    super("provider_rate_limited", "The model provider is rate limiting this service; try again later", {
      status: 429,
      detail,
      rateLimit: true,
      ...(retryAfter && RETRY_AFTER.test(retryAfter) ? { headers: { "Retry-After": retryAfter } } : {}),
    });
  }
}

export class ProviderFailed extends ProviderError {
  /** `reason`: what went wrong, in the service's words ("it answered HTTP 500"), never the provider's. */
  constructor(reason: string, options: { status?: number; detail?: string; cause?: unknown } = {}) {
    super("bad_gateway", `The model provider failed: ${reason}`, options);
  }
}

/** Delay-seconds or an HTTP date (RFC 9110 10.2.3). */
export const RETRY_AFTER = /^(\d{1,10}|[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT)$/;

/** Longest provider text kept for the log. */
const DETAIL_CHARS = 512;

const REDACTIONS: [RegExp, string][] = [
  // Credentials in URLs: scheme://user:password@host
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi, "$1[redacted]@"],
  [/\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi, "$1 [redacted]"],
  // name=value and "name": "value" pairs whose name says secret
  [
    /\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|authorization)(["']?\s*[:=]\s*["']?)[^\s"'&,;}]+/gi,
    "$1$2[redacted]",
  ],
  // API keys by their usual prefixes, and any long token-like run
  [/\b(?:sk|rk|pk|gwsk)[-_][A-Za-z0-9_-]{8,}/g, "[redacted]"],
  [/[A-Za-z0-9+/_-]{40,}={0,2}/g, "[redacted]"],
];

/**
 * Provider text fit for a log line: credentials (the provider's key itself,
 * URL passwords, bearer tokens, `password=…`, key-like strings) replaced,
 * then cut to 512 characters.
 */
export function redactProviderText(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const secret of secrets) if (secret && secret.length >= 4) out = out.replaceAll(secret, "[redacted]");
  for (const [pattern, replacement] of REDACTIONS) out = out.replace(pattern, replacement);
  return cutText(out, DETAIL_CHARS);
}
