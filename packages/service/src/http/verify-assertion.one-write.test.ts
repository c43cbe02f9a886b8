import type { Writable } from "node:stream";
import { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";

const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_1",
  permissions: ["llm:call"],
  credential: "api_key",
  onBehalfOf: false,
};

describe("the service's door, on Redis", () => {
  const test = useTestRedis();
  const assertions = new InternalAssertions("s".repeat(40));

  /** Calls `run` and counts the writes the client's connection made to its socket meanwhile. */
  async function writesDuring(run: () => Promise<unknown>): Promise<number> {
    await test.redis.ping();
    const socket = (test.redis as unknown as { stream: Writable & Record<string, unknown> }).stream;
    let writes = 0;
    const originals = { _write: socket._write, _writev: socket._writev };
    for (const name of ["_write", "_writev"] as const) {
      const original = originals[name] as (...args: unknown[]) => unknown;
      socket[name] = (...args: unknown[]) => {
        writes++;
        return original.apply(socket, args);
      };
    }
    try {
      await run();
    } finally {
      Object.assign(socket, originals);
    }
    return writes;
  }

  it("sends a model call's reads and its assertion's id to Redis in one write, and still refuses a replay", async () => {
    const request = { method: "POST", path: "/api/v1/llm/chat/completions", requestId: "rid-together" };
    const assertion = await assertions.sign(principal, request);
    let version: Promise<string | null> | undefined;
    const writes = await writesDuring(async () => {
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
