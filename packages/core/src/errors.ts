/**
 * The closed catalogue of errors the gateway and the service answer with.
 * Domain code throws `AppError`s (or its own errors extending it) by code;
 * only the HTTP layer (`http/common.ts`, `http/listen.ts`) turns them into
 * status lines and bodies, through `errorBody`.
 */
export const ERROR_CATALOGUE = {
  bad_request: { status: 400, title: "Bad Request" },
  unauthorized: { status: 401, title: "Unauthorized" },
  forbidden: { status: 403, title: "Forbidden" },
  not_found: { status: 404, title: "Not Found" },
  request_timeout: { status: 408, title: "Request Timeout" },
  conflict: { status: 409, title: "Conflict" },
  payload_too_large: { status: 413, title: "Payload Too Large" },
  unsupported_media_type: { status: 415, title: "Unsupported Media Type" },
  validation_failed: { status: 422, title: "Unprocessable Entity" },
  rate_limited: { status: 429, title: "Rate limit exceeded" },
  request_header_fields_too_large: { status: 431, title: "Request Header Fields Too Large" },
  internal: { status: 500, title: "Internal Server Error" },
  bad_gateway: { status: 502, title: "Bad Gateway" },
  service_unavailable: { status: 503, title: "Service Unavailable" },
  gateway_timeout: { status: 504, title: "Gateway Timeout" },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

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

  constructor(
    code: ErrorCode,
    message: string,
    options: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.headers = options.headers ?? {};
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

/** The JSON body the catalogue gives an error: the spec's shapes for 422 and 429, `{error, message}` otherwise. */
export function errorBody(err: AppError): unknown {
  if (err instanceof ValidationFailed) return { detail: err.issues };
  if (err.code === "rate_limited") return { error: ERROR_CATALOGUE.rate_limited.title };
  return { error: ERROR_CATALOGUE[err.code].title, message: err.message };
}

export const unauthorized = (message: string) =>
  new AppError("unauthorized", message, { headers: { "WWW-Authenticate": 'Bearer realm="gateway"' } });
export const forbidden = (message: string) => new AppError("forbidden", message);
export const notFound = (message: string) => new AppError("not_found", message);
export const conflict = (message: string) => new AppError("conflict", message);
export const serviceUnavailable = (message: string, cause?: unknown) =>
  new AppError("service_unavailable", message, { cause });
