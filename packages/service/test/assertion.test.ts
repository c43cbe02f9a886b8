import { randomUUID } from "node:crypto";
import { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "./stack.ts";

// Behind its own HTTP server, whatever TEST_SERVICE_IN_GATEWAY says: the last test stops the service and
// reads the gateway's 502, which only a hop can give.
const stack = useStack({}, {}, undefined, "single", {}, "separate");
const PATH = "/api/v1/llm/conversations";
const principal: Principal = {
  org: "acme",
  user: "mallory",
  keyId: "key_x",
  permissions: ["conversations:write", "conversations:read"],
  credential: "api_key",
  onBehalfOf: false,
};

async function direct(assertion: string | undefined, requestId: string, path = PATH) {
  return fetch(`${stack.serviceUrl}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-request-id": requestId,
      ...(assertion ? { "x-gateway-assertion": assertion } : {}),
    },
    body: "{}",
  });
}

describe("the service trusts only the gateway", () => {
  it("refuses a request without an assertion, even with a valid API key", async () => {
    const key = await stack.createKey();
    const res = await fetch(`${stack.serviceUrl}${PATH}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual(llmError("unauthorized", "Requests must come through the gateway"));
  });

  it("refuses an assertion signed with another secret", async () => {
    const forger = new InternalAssertions("x".repeat(40));
    const id = randomUUID();
    const res = await direct(await forger.sign(principal, { method: "POST", path: PATH, requestId: id }), id);
    expect(res.status).toBe(401);
  });

  it("accepts a genuine assertion once, and refuses it replayed, on another path, or for another request", async () => {
    const real = new InternalAssertions(stack.assertionSecret);
    const id = randomUUID();
    const assertion = await real.sign(principal, { method: "POST", path: PATH, requestId: id });
    expect((await direct(assertion, id)).status).toBe(200);
    const replay = await direct(assertion, id);
    expect(replay.status).toBe(401);
    expect((await replay.json()).error.message).toMatch(/already used/);

    const other = randomUUID();
    const forPath = await real.sign(principal, { method: "POST", path: PATH, requestId: other });
    expect((await direct(forPath, other, `${PATH}/conv_x`)).status).toBe(401);
    expect((await direct(forPath, randomUUID())).status).toBe(401);
  });

  it("acts for the end user on the assertion alone, through the gateway", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, PATH, { json: {}, user: "alice" });
    expect(res.status).toBe(200);
    // The conversation was made for the end user through the assertion alone.
    const conversation = await res.json();
    const check = await stack.call(
      key.secret,
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation.id}&role=owner`,
      { user: "alice" },
    );
    expect(await check.json()).toEqual({ allowed: true });
  });
});

describe("paths reach the service exactly as sent", () => {
  it("unusual but valid characters are neither normalised nor refused", async () => {
    const key = await stack.createKey();
    const braces = await stack.call(key.secret, "/api/v1/llm/conversations/a{b}", { user: "alice" });
    expect(braces.status).toBe(404);
    const quoted = await stack.call(key.secret, '/api/v1/usage?start="x"');
    expect(quoted.status).toBe(422);
    const dots = await stack.call(key.secret, "/api/v1/llm/conversations/%2e%2e/x", { user: "alice" });
    expect(dots.status).toBe(404);
  });
});

describe("forwarding when the service is gone", () => {
  it("answers 502 in JSON", async () => {
    const key = await stack.createKey();
    await stack.stopService();
    const res = await stack.call(key.secret, PATH, { json: {}, user: "alice" });
    expect(res.status).toBe(502);
    // The gateway's own error on the llm surface: OpenAI's shape too.
    expect(await res.json()).toEqual(llmError("bad_gateway", "The service is unreachable"));
  });
});
