import { AppError } from "@gw/core/errors";
import { describe, expect, it } from "vitest";
import { ApiKeyStoreUnavailable } from "../src/api-keys/lookup.ts";
import { ApiKeyChangedConcurrently, DuplicateSecretError } from "../src/api-keys/store.ts";
import { RateLimitUnavailable } from "../src/rate-limit/request-windows.ts";

describe("the gateway's domain errors carry their catalogue code (the error middleware picks the status)", () => {
  it.each([
    ["ApiKeyStoreUnavailable", new ApiKeyStoreUnavailable(new Error("ECONNREFUSED")), "service_unavailable"],
    ["RateLimitUnavailable", new RateLimitUnavailable(new Error("ECONNREFUSED")), "service_unavailable"],
    ["ApiKeyChangedConcurrently", new ApiKeyChangedConcurrently("key_1"), "conflict"],
    ["DuplicateSecretError", new DuplicateSecretError(), "conflict"],
  ])("%s", (_name, error, code) => {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(code);
    expect(error.message).not.toContain("ECONNREFUSED");
  });
});
