import { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { socketWritesDuring, useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";

const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_1",
  permissions: ["responses:write"],
  credential: "api_key",
  onBehalfOf: false,
};

describe("the service's door, on Redis", () => {
  const test = useTestRedis();
  const assertions = new InternalAssertions("s".repeat(40));

  it("sends a model call's reads and its assertion's id to Redis in one write, and still refuses a replay", async () => {
    const request = { method: "POST", path: "/api/v1/llm/chat/completions", requestId: "rid-together" };
    const assertion = await assertions.sign(principal, request);
    let version: Promise<string | null> | undefined;
    const writes = await socketWritesDuring(test.redis, async () => {
      const { firstUse } = await assertions.verifyFirstUse(assertion, request, test.redis, () => {
        version = test.redis.get("gw:test:guardrail-version");
      });
      await Promise.all([firstUse, version]);
    });
    expect(version).toBeDefined();
    expect(writes).toBe(1);
    const again = await assertions.verifyFirstUse(assertion, request, test.redis);
    await expect(again.firstUse).rejects.toThrow("already used");
  });
});
