/**
 * The closed catalogue of errors the gateway and the service answer with.
 * Domain code throws `AppError`s (or its own errors extending it) by code;
 * only the HTTP layer (`http/common.ts`, `http/listen.ts`) turns them into
 * status lines and bodies, through `errorBody`.
 */
export const ERROR_CATALOGUE = {
  bad_request: { status: 400, title: "Bad Request", type: "invalid_request_error" },
  unauthorized: { status: 401, title: "Unauthorized", type: "authentication_error" },
  forbidden: { status: 403, title: "Forbidden", type: "permission_error" },
  not_found: { status: 404, title: "Not Found", type: "invalid_request_error" },
  method_not_allowed: { status: 405, title: "Method Not Allowed", type: "invalid_request_error" },
  request_timeout: { status: 408, title: "Request Timeout", type: "invalid_request_error" },
  conflict: { status: 409, title: "Conflict", type: "invalid_request_error" },
  payload_too_large: { status: 413, title: "Payload Too Large", type: "invalid_request_error" },
  /** An uploaded file larger than `FILE_MAX_BYTES` (not a JSON body over its limit). */
  file_too_large: { status: 413, title: "Payload Too Large", type: "invalid_request_error" },
  /** An upload that would take the organization's stored files past `FILE_STORAGE_QUOTA_BYTES`. */
  storage_quota_exceeded: { status: 413, title: "Payload Too Large", type: "invalid_request_error" },
  unsupported_media_type: { status: 415, title: "Unsupported Media Type", type: "invalid_request_error" },
  expectation_failed: { status: 417, title: "Expectation Failed", type: "invalid_request_error" },
  /** A guardrail attached to the call blocked its input (the model was never called, nothing was charged). */
  guardrail_blocked: { status: 400, title: "Bad Request", type: "invalid_request_error" },
  validation_failed: { status: 422, title: "Unprocessable Entity", type: "invalid_request_error" },
  rate_limited: { status: 429, title: "Rate limit exceeded", type: "rate_limit_error" },
  /** The model provider's own 429, passed on (not the key's quota, whose body is the contract's). */
  provider_rate_limited: { status: 429, title: "Too Many Requests", type: "rate_limit_error" },
  /** The key has `BACKGROUND_RESPONSES_PER_KEY` background responses in flight already. */
  background_limit_exceeded: { status: 429, title: "Too Many Requests", type: "rate_limit_error" },
  request_header_fields_too_large: {
    status: 431,
    title: "Request Header Fields Too Large",
    type: "invalid_request_error",
  },
  internal: { status: 500, title: "Internal Server Error", type: "server_error" },
  bad_gateway: { status: 502, title: "Bad Gateway", type: "server_error" },
  service_unavailable: { status: 503, title: "Service Unavailable", type: "server_error" },
  gateway_timeout: { status: 504, title: "Gateway Timeout", type: "server_error" },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/**
 * Causes a client can tell apart within one catalogue code, each with the
 * catalogue code (so the status) it comes under. A body's `code` is the cause
 * when the error has one, else its catalogue code; every one of them is listed
 * in docs/api/errors.md. Stable: a cause is never renamed, only added.
 */
export const ERROR_CAUSES = {
  no_route: "not_found",
  missing_credential: "unauthorized",
  ambiguous_credential: "unauthorized",
  malformed_credential: "unauthorized",
  invalid_api_key: "unauthorized",
  invalid_token: "unauthorized",
  revoked: "unauthorized",
  expired: "unauthorized",
  invalid_assertion: "unauthorized",
  missing_permission: "forbidden",
  not_writer: "forbidden",
  last_owner: "conflict",
  already_registered: "conflict",
  service_issued_id: "conflict",
  duplicate_secret: "conflict",
  api_key_changed_concurrently: "conflict",
  spicedb_unavailable: "service_unavailable",
  data_store_unavailable: "service_unavailable",
  api_key_store_unavailable: "service_unavailable",
  session_not_found: "not_found",
  no_connection: "conflict",
  unreadable_connection: "conflict",
  session_busy: "conflict",
  lock_lost: "service_unavailable",
  stale_assignment: "conflict",
  no_working_tree: "conflict",
  repository_missing: "conflict",
  checkout_unusable: "conflict",
  nested_repository: "conflict",
  nothing_to_push: "conflict",
  push_rejected: "conflict",
  remote_failed: "bad_gateway",
  git_timed_out: "gateway_timeout",
  request_cancelled: "bad_request",
  mcp_upstream_failed: "bad_gateway",
  mcp_upstream_timeout: "gateway_timeout",
  mcp_answer_too_large: "bad_gateway",
  mcp_too_many_tools: "bad_gateway",
  model_unavailable: "service_unavailable",
} as const satisfies Record<string, ErrorCode>;

export type ErrorCause = keyof typeof ERROR_CAUSES;

/** One item of the spec's `HTTPValidationError.detail` (pydantic's shape). */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  /** Response headers that belong to this error (e.g. `WWW-Authenticate`). */
  readonly headers: Record<string, string>;
  /** The one request field at fault, when there is one (OpenAI's `param`, e.g. `model`). */
  readonly param: string | undefined;
  /** A rate limit, whatever its code (the key's or the provider's): a failed response says `rate_limit_exceeded`. */
  readonly rateLimit: boolean;
  /** What the body's `code` says: the cause (`ERROR_CAUSES`), else the catalogue code. */
  readonly reason: ErrorCause | ErrorCode;
  /** The contract fixes this error's body to `{error, message}` (403 of grant and revoke): no `code`. */
  readonly contractBody: boolean;
  /**
   * The refused request was a JSON-RPC request with this id (`null`: not
   * readable): the body is a JSON-RPC error response, so MCP clients read the
   * message (docs/api/mcp.md, "The proxy"). Set by the HTTP layer that read
   * the request, once it knows the error is answered to one.
   */
  jsonRpcId: string | number | null | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      headers?: Record<string, string>;
      cause?: unknown;
      param?: string;
      rateLimit?: boolean;
      reason?: ErrorCause;
      contractBody?: boolean;
      jsonRpcId?: string | number | null;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.headers = options.headers ?? {};
    this.param = options.param;
    this.rateLimit = options.rateLimit ?? (code === "rate_limited" || code === "provider_rate_limited");
    this.reason = options.reason ?? code;
    this.contractBody = options.contractBody ?? false;
    this.jsonRpcId = options.jsonRpcId;
  }

  get status(): number {
    return ERROR_CATALOGUE[this.code].status;
  }
}

export class ValidationFailed extends AppError {
  readonly issues: ValidationIssue[];

  constructor(issues: ValidationIssue[]) {
    super("validation_failed", issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "));
    this.name = "ValidationFailed";
    this.issues = issues;
  }
}

/**
 * The OAuth error codes of RFC 6749 (5.2, 4.1.2.1), RFC 7591 (3.2.2) and RFC
 * 8707 (2), each with the catalogue code (so the status) it comes under. The
 * authorization server's endpoints answer with these, in RFC 6749's body.
 */
export const OAUTH_ERRORS = {
  invalid_request: "bad_request",
  invalid_client: "unauthorized",
  invalid_grant: "bad_request",
  unauthorized_client: "bad_request",
  unsupported_grant_type: "bad_request",
  unsupported_response_type: "bad_request",
  invalid_scope: "bad_request",
  invalid_target: "bad_request",
  invalid_redirect_uri: "bad_request",
  invalid_client_metadata: "bad_request",
  access_denied: "forbidden",
  temporarily_unavailable: "service_unavailable",
} as const satisfies Record<string, ErrorCode>;

export type OAuthErrorCode = keyof typeof OAUTH_ERRORS;

/**
 * An error of the OAuth authorization server: its body is RFC 6749's
 * `{"error": <code>, "error_description": <message>}`, which OAuth clients
 * parse (the MCP SDKs raise a typed error per code).
 */
export class OAuthError extends AppError {
  readonly oauthCode: OAuthErrorCode;

  constructor(
    oauthCode: OAuthErrorCode,
    message: string,
    options: { headers?: Record<string, string> } = {},
  ) {
    super(OAUTH_ERRORS[oauthCode], message, options);
    this.name = "OAuthError";
    this.oauthCode = oauthCode;
  }
}

/**
 * A model call's input blocked by a guardrail: names the guardrail and the
 * check, never the text they matched. On the OpenAI-compatible surface its
 * body carries a `detail` item (as a 422's) beside OpenAI's `error`.
 */
export class GuardrailBlocked extends AppError {
  readonly guardrail: string;
  readonly check: string;
  /** The request field that holds what was blocked: Responses' `input`, chat completions' `messages`. */
  field: "input" | "messages" = "input";

  constructor(guardrail: { id: string; name: string }, check: string) {
    super(
      "guardrail_blocked",
      `The request was blocked by guardrail ${guardrail.id} (${guardrail.name}): ${check}`,
    );
    this.name = "GuardrailBlocked";
    this.guardrail = guardrail.id;
    this.check = check;
  }

  /** Where and why, in the shape of a 422's `detail`: the input as a whole, never the text matched. */
  get issues(): ValidationIssue[] {
    return [
      {
        loc: ["body", this.field],
        msg: this.message,
        type: "guardrail_blocked",
        ctx: { guardrail: this.guardrail, check: this.check },
      },
    ];
  }
}

/** `text` cut to its first `max` characters, with "…" where it was cut: what a message or a log line may echo of it. */
export const cutText = (text: string, max: number): string =>
  text.length > max ? `${text.slice(0, max)}…` : text;

/** OpenAI's error body, which the OpenAI client libraries read into `message`, `type`, `code` and `param`. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * The JSON body the catalogue gives an error: the spec's shapes for 422 and
 * the key's 429; on the OpenAI-compatible surface (`openai`: `/api/v1/llm`)
 * OpenAI's `{"error": {message, type, param, code}}` for every other status
 * (and beside the 422's `detail`), so the OpenAI SDKs show the reason (its
 * `code` the catalogue code, as OpenAI clients of this gateway match it);
 * `{error, message, code}` elsewhere, with the cause as `code`
 * (`{error, message}` where the contract fixes it); an `OAuthError` RFC 6749's
 * `{error, error_description}`.
 */
export function errorBody(err: AppError, surface: { openai?: boolean } = {}): unknown {
  if (err.jsonRpcId !== undefined) return jsonRpcErrorBody(err, err.jsonRpcId);
  if (err instanceof ValidationFailed)
    return surface.openai ? { detail: err.issues, ...validationErrorOf(err.issues) } : { detail: err.issues };
  if (err.code === "rate_limited") return { error: ERROR_CATALOGUE.rate_limited.title };
  if (err instanceof OAuthError) return { error: err.oauthCode, error_description: err.message };
  if (surface.openai && err instanceof GuardrailBlocked)
    return { detail: err.issues, ...openaiErrorBody(err.code, err.message, err.param) };
  if (surface.openai) return openaiErrorBody(err.code, err.message, err.param);
  if (err.contractBody) return { error: ERROR_CATALOGUE[err.code].title, message: err.message };
  return { error: ERROR_CATALOGUE[err.code].title, message: err.message, code: err.reason };
}

/**
 * JSON-RPC error codes of catalogue errors answered to a JSON-RPC request
 * (docs/api/mcp.md, "The proxy"): what the HTTP status says, said
 * again for clients that read only the body. A refusal of the client's is
 * -32000 less the status's last two digits (-32001 for 401, -32029 for
 * 429), in the range JSON-RPC leaves to servers and apart from MCP's own
 * codes there (-32002, -32020, -32022, -32042); a request that cannot be
 * read is JSON-RPC's Invalid Request (-32600), or its Parse error (-32700)
 * when its JSON is unreadable. Any other error (the gateway's or a
 * dependency's, 5xx) is -32603, Internal error.
 */
const JSON_RPC_CODES: Partial<Record<ErrorCode, number>> = {
  bad_request: -32600,
  validation_failed: -32600,
  unauthorized: -32001,
  forbidden: -32003,
  not_found: -32004,
  method_not_allowed: -32005,
  payload_too_large: -32013,
  unsupported_media_type: -32015,
  rate_limited: -32029,
};

/** JSON-RPC's Parse error: the request's JSON could not be read. */
const JSON_RPC_PARSE_ERROR = -32700;

const jsonRpcCodeOf = (err: AppError) =>
  err instanceof ValidationFailed && err.issues.some((issue) => issue.type === "json_invalid")
    ? JSON_RPC_PARSE_ERROR
    : (JSON_RPC_CODES[err.code] ?? -32603);

/**
 * A catalogue error as a JSON-RPC 2.0 error response that is still the
 * catalogue's body: `error` is JSON-RPC's object (the catalogue's title is in
 * `error.data.error`), and the catalogue's `message` and `code` stay at the
 * top level beside `jsonrpc` and `id` (a 422's `detail` too), so a reader of
 * either shape finds the message. The MCP Python SDK reads such a body as the
 * JSON-RPC error (it allows other members); the TypeScript SDK's strict
 * schema does not, and shows the body's text, which holds the message.
 */
export function jsonRpcErrorBody(err: AppError, id: string | number | null) {
  return {
    jsonrpc: "2.0" as const,
    id,
    error: {
      code: jsonRpcCodeOf(err),
      message: err.message,
      data: { error: ERROR_CATALOGUE[err.code].title, code: err.reason },
    },
    message: err.message,
    code: err.reason,
    ...(err instanceof ValidationFailed ? { detail: err.issues } : {}),
  };
}

export function openaiErrorBody(code: ErrorCode, message: string, param?: string): OpenAIErrorBody {
  return { error: { message, type: ERROR_CATALOGUE[code].type, param: param ?? null, code } };
}

/**
 * A 422's problems as OpenAI's error object, for clients that read only
 * `error` (openai-node builds its message from it): the first problem's
 * field as a dotted `param` (without its location: `messages.2.name`; a
 * header or query parameter by its name), `message` naming it and why, and
 * `code` the problem's pydantic type (`extra_forbidden`, `missing`, …).
 */
export function validationErrorOf(issues: readonly ValidationIssue[]): OpenAIErrorBody {
  const first = issues[0];
  if (!first) return openaiErrorBody("validation_failed", "The request is not valid");
  const path = first.loc.slice(1).join(".");
  const where = path || String(first.loc[0] ?? "body");
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more: see detail)` : "";
  return {
    error: {
      message: `Invalid '${where}': ${first.msg}${more}`,
      type: ERROR_CATALOGUE.validation_failed.type,
      param: path || null,
      code: first.type,
    },
  };
}

/**
 * What a client is told of an error: a catalogue error as it is; anything
 * else is `internal` with `fallback`, never its own text. The error
 * middleware answers with it, and so do the events that end a stream
 * already begun (whose status line is sent): `streamErrorChunk`, `responseFailure`.
 */
export function toAppError(err: unknown, fallback: string): AppError {
  return err instanceof AppError ? err : new AppError("internal", fallback);
}

/** The chunk that ends a chat completions stream which failed after it began: OpenAI's error body, as the SDKs raise it. */
export function streamErrorChunk(err: unknown, fallback: string): OpenAIErrorBody {
  const e = toAppError(err, fallback);
  return openaiErrorBody(e.code, e.message, e.param);
}

/** The `error` of a response that failed after its stream began (`response.failed`), in OpenAI's Responses codes. */
export function responseFailure(
  err: unknown,
  fallback: string,
): { code: "rate_limit_exceeded" | "server_error"; message: string } {
  const e = toAppError(err, fallback);
  return { code: e.rateLimit ? "rate_limit_exceeded" : "server_error", message: e.message };
}

/** Paths of the OpenAI-compatible surface, whose errors take OpenAI's shape. */
export const isOpenAISurface = (path: string) => /^\/api\/v1\/llm(?:[/?#]|$)/.test(path);

export const unauthorized = (message: string, reason?: ErrorCause) =>
  new AppError("unauthorized", message, {
    headers: { "WWW-Authenticate": 'Bearer realm="gateway"' },
    reason,
  });
export const forbidden = (message: string, options: { param?: string; reason?: ErrorCause } = {}) =>
  new AppError("forbidden", message, options);
export const notFound = (message: string) => new AppError("not_found", message);
export const conflict = (message: string) => new AppError("conflict", message);
export const serviceUnavailable = (message: string, cause?: unknown) =>
  new AppError("service_unavailable", message, { cause });
