import { AppError } from "@gw/core";
import { ProviderError } from "../../llm/provider.ts";

/** How a model-provider failure answers the caller. */
export function providerErrorToHttp(err: unknown): unknown {
  if (!(err instanceof ProviderError)) return err;
  const f = err.failure;
  switch (f.kind) {
    case "not_configured":
      return new AppError("service_unavailable", err.message, { cause: err });
    case "timeout":
      return new AppError("gateway_timeout", err.message, { cause: err });
    case "rate_limited":
      return new AppError("rate_limited", err.message, {
        cause: err,
        ...(f.retryAfter ? { headers: { "Retry-After": f.retryAfter } } : {}),
      });
    case "upstream":
      return new AppError("bad_gateway", err.message, { cause: err });
  }
}
