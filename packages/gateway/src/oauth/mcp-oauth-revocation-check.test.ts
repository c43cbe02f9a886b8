import { AppError } from "@gw/core/errors";
import { createRedis } from "@gw/core/redis";
import type { Request, Response } from "express";
import { describe, expect, it } from "vitest";
import type { ApiKeyLookup } from "../api-keys/lookup.ts";
import type { ApiKeyRecord } from "../api-keys/types.ts";
import { authenticate } from "../authenticate/authenticate.ts";
import { createGatewayMetrics } from "../metrics.ts";
import type { TokenService } from "../tokens/tokens.ts";
import { RevokedFamilies } from "./revoked-families.ts";

const KEY = { id: "key_1", org: "org-a", owner: "bob", status: "active", expiresAt: null } as ApiKeyRecord;
const TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2ln";

/** One request through `authenticate` with a token the (stand-in) token service verifies to `claims`. */
async function authenticateWith(claims: Record<string, unknown>, revokedFamilies?: RevokedFamilies) {
  const middleware = authenticate({
    keys: { findById: async () => KEY } as unknown as ApiKeyLookup,
    tokens: {
      verify: async () => ({
        sub: "bob",
        org: "org-a",
        key_id: "key_1",
        permissions: ["mcp:call"],
        ...claims,
      }),
    } as unknown as TokenService,
    audience: "https://gateway.test",
    metrics: createGatewayMetrics(),
    revokedFamilies,
  });
  const req = { headersDistinct: { authorization: [`Bearer ${TOKEN}`] } } as unknown as Request;
  const res = { locals: {} } as Response;
  let passed = false;
  await middleware(req, res, () => {
    passed = true;
  });
  return passed;
}

describe("an OAuth-issued token's authorization is checked on every request", () => {
  it("Redis unable to answer: the token is refused with 503, never let through; a token minted from a key is not asked about", async () => {
    // A port nothing listens on, no offline queue: every command fails at once.
    const redis = createRedis("redis://127.0.0.1:1", {
      connectionName: "revocation-check-test",
      extra: { enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null },
    });
    redis.on("error", () => {});
    try {
      const revoked = new RevokedFamilies(redis, 900, 30);
      const refused = await authenticateWith({ sid: "family-1" }, revoked).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).code).toBe("service_unavailable");
      expect(await authenticateWith({}, revoked)).toBe(true);
    } finally {
      redis.disconnect();
    }
  });

  it("a gateway without the revocation store refuses every token that names an authorization", async () => {
    const refused = await authenticateWith({ sid: "family-1" }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe("unauthorized");
  });
});
