import { forbidden } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { PERMISSIONS } from "@gw/core/permissions";
import { principalUserIdSchema } from "@gw/core/principal";
import { validate } from "@gw/core/validation";
import { z } from "zod";
import type { GatewayMetrics } from "../../metrics.ts";
import { type ActingDeps, actFor } from "../../principal/resolve-principal.ts";
import type { TokenService } from "../../tokens/tokens.ts";

export interface ExchangeTokenResponse {
  token: string;
}

export const DEFAULT_TOKEN_LIFETIME_SECONDS = 3_600;

export const exchangeTokenBody = z.strictObject({
  audience: z.url({ protocol: /^https?$/ }),
  externalUserId: principalUserIdSchema,
  expiresIn: z.int().min(300).max(2_592_000).default(DEFAULT_TOKEN_LIFETIME_SECONDS),
  permissions: z
    .array(z.string())
    .refine((list) => new Set(list).size === list.length, "List should not contain duplicates")
    .optional(),
});

/**
 * `POST /api/v1/authentication/api-keys/exchange-token`: a server holding an
 * API key mints a short-lived token for one of its end users. Only API keys
 * mint (a token cannot), and never with more permissions than the key has.
 */
export const exchangeToken = defineRoute({
  method: "POST",
  path: "/api/v1/authentication/api-keys/exchange-token",
  operationId: "exchangeToken",
  summary: "Exchange an API key for a short-lived JWT for one end user",
  description:
    "Only an API key can be exchanged, and never for more permissions than it has; `admin:api-keys` is never delegated.",
  tag: "Authentication",
  body: exchangeTokenBody,
  // Validated here, after the credential's kind: a token asking is refused whatever its body, and counted.
  bodyValidation: { byHandler: true },
  responses: {
    200: { description: "The token", schema: objectSchema({ token: stringSchema("A short-lived JWT") }) },
  },
  handler: async (
    { principal, body, req, res },
    deps: ActingDeps & { tokens: TokenService; metrics: GatewayMetrics },
  ) => {
    const { tokens, metrics } = deps;
    if (principal.credential !== "api_key") {
      metrics.tokenExchanges.inc({ outcome: "forbidden" });
      throw forbidden("Only an API key can be exchanged for a token");
    }
    let input: z.output<typeof exchangeTokenBody>;
    try {
      input = validate("body", exchangeTokenBody, body);
    } catch (err) {
      metrics.tokenExchanges.inc({ outcome: "invalid" });
      throw err;
    }
    const key = res.locals.apiKey;
    if (!key) throw new Error("exchange-token runs after authenticate");
    try {
      // The token's subject is who it acts for: within the key's policy, as `X-On-Behalf-Of` would be.
      await actFor(deps, { req, res, key, credential: "api_key" }, input.externalUserId, "externalUserId");
    } catch (err) {
      metrics.tokenExchanges.inc({ outcome: "forbidden" });
      throw err;
    }
    // Key administration is never delegated: a token in a browser must not be able to mint keys.
    if (input.permissions?.includes("admin:api-keys")) {
      metrics.tokenExchanges.inc({ outcome: "forbidden" });
      throw forbidden("admin:api-keys cannot be delegated to a token");
    }
    const requested = input.permissions ?? principal.permissions.filter((p) => p !== "admin:api-keys");
    const excess = requested.filter((p) => !principal.permissions.includes(p as never));
    if (excess.length > 0) {
      metrics.tokenExchanges.inc({ outcome: "forbidden" });
      const unknown = excess.filter((p) => !(PERMISSIONS as readonly string[]).includes(p));
      throw forbidden(
        `Requested permissions exceed the API key's: ${excess.join(", ")}${unknown.length ? ` (unknown: ${unknown.join(", ")})` : ""}`,
      );
    }
    const token = await tokens.sign(
      {
        sub: input.externalUserId,
        aud: input.audience,
        org: principal.org,
        keyId: principal.keyId,
        permissions: principal.permissions.filter((p) => requested.includes(p)),
      },
      input.expiresIn,
    );
    metrics.tokenExchanges.inc({ outcome: "issued" });
    const response: ExchangeTokenResponse = { token };
    return response;
  },
});
