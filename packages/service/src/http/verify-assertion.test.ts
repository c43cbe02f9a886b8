import { randomUUID } from "node:crypto";
import { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import { monitorCommands } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useStack } from "../../test/stack.ts";

const stack = useStack();

/** A request as the gateway sends it: a fresh assertion for exactly it. */
async function send(principal: Principal, path: string, body: unknown) {
  const requestId = randomUUID();
  const assertion = await new InternalAssertions(stack.assertionSecret).sign(
    principal,
    { method: "POST", path, requestId },
    { limits: {} },
  );
  return fetch(`${stack.serviceUrl}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-request-id": requestId,
      "x-gateway-assertion": assertion,
    },
    body: JSON.stringify(body),
  });
}

describe("reads sent beside the replay guard", () => {
  it("a model call's guardrail version is read while its assertion's id is still on its way (one round trip); another route reads none", async () => {
    const org = `org-${randomUUID()}`;
    const principal: Principal = {
      org,
      user: "alice",
      keyId: "key_beside",
      permissions: ["responses:write", "responses:read", "conversations:write"],
      credential: "api_key",
      onBehalfOf: false,
    };
    const versionKey = `gw:guardrails:${org}:version`;
    const monitor = await monitorCommands(stack.redisServer);
    const pauser = createRedis(stack.redisUrl, { connectionName: "test-pause" });
    // Every write held: the replay guard's SET waits in Redis, reads still pass.
    await pauser.call("CLIENT", "PAUSE", "60000", "WRITE");
    let answer: Promise<Response>;
    try {
      answer = send(principal, "/api/v1/llm/chat/completions", {
        model: "gpt-test",
        messages: [{ role: "user", content: "hello" }],
      });
      await expect
        .poll(() => monitor.commands.some(([name, key]) => name === "get" && key === versionKey), {
          timeout: 5_000,
        })
        .toBe(true);
      expect(monitor.commands.some(([name, key]) => name === "set" && key?.startsWith("gw:assertion:"))).toBe(
        false,
      );
    } finally {
      await pauser.call("CLIENT", "UNPAUSE");
      pauser.disconnect();
    }
    expect((await answer).status).toBe(200);
    expect((await send(principal, "/api/v1/llm/conversations", {})).status).toBe(200);
    await monitor.stop();
    const versionReads = monitor.commands.filter(([name, key]) => name === "get" && key === versionKey);
    expect(versionReads).toHaveLength(1);
  });
});
