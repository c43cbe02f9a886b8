import { keyRefusal } from "@gw/core/key-standing";
import { describe, expect, it } from "vitest";

describe("whether a stored API key may act (keyRefusal)", () => {
  const now = Date.parse("2026-11-28T12:00:00Z");
  it.each([
    [{ status: "active", expiresAt: null }, undefined],
    [{ status: "active" }, undefined],
    [{ status: "active", expiresAt: "2026-11-28T12:00:00.001Z" }, undefined],
    [{ status: "active", expiresAt: "2026-11-28T12:00:00Z" }, "expired"],
    [{ status: "active", expiresAt: "2026-11-27T00:00:00Z" }, "expired"],
    [{ status: "revoked", expiresAt: null }, "revoked"],
    [{ status: "revoked", expiresAt: "2026-11-27T00:00:00Z" }, "revoked"],
    [{ status: "suspended", expiresAt: null }, "revoked"],
  ] as const)("%j → %s", (key, refusal) => {
    expect(keyRefusal(key, now)).toBe(refusal);
  });
});
