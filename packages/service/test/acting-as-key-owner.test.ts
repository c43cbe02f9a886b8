import { randomUUID } from "node:crypto";
import { ASSERTION_HEADER, InternalAssertions } from "@gw/core/internal-assertion";
import { PERMISSIONS } from "@gw/core/permissions";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "./stack.ts";

const refusal = (source: string, user: string) =>
  `${source} '${user}' owns an API key of this organization, and this API key's X-On-Behalf-Of policy does not name them in users`;

describe("no key acts as another key's owner, on the service's routes and the hosted tools' path", () => {
  const stack = useStack();

  /** alice owns the organization's root key and a conversation; bob has a key of the same organization. */
  async function aliceAndBob() {
    const alice = await stack.createKey({ owner: "alice", permissions: [...PERMISSIONS] });
    const bob = await stack.createKey({ org: alice.org, owner: "bob" });
    const created = await stack.call(alice.secret, "/api/v1/llm/conversations", { json: {} });
    expect(created.status).toBe(200);
    const { id } = await created.json();
    return { alice, bob, id };
  }

  it("bob's key can neither read alice's conversation as alice nor grant it away", async () => {
    const { alice, bob, id } = await aliceAndBob();
    const read = await stack.call(bob.secret, `/api/v1/llm/conversations/${id}`, { user: "alice" });
    expect(read.status).toBe(403);
    expect(await read.json()).toEqual(llmError("forbidden", refusal("X-On-Behalf-Of", "alice")));

    const grant = await stack.call(bob.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "conversation", resourceId: id, userId: "bob", role: "owner" },
      user: "alice",
    });
    expect(grant.status).toBe(403);
    expect((await grant.json()).message).toBe(refusal("X-On-Behalf-Of", "alice"));

    // Nothing changed: bob has no role on it, and alice still reads it.
    const check = await stack.call(
      bob.secret,
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=reader`,
    );
    expect(await check.json()).toEqual({ allowed: false });
    expect((await stack.call(alice.secret, `/api/v1/llm/conversations/${id}`)).status).toBe(200);
  });

  it("a hosted tool's call asserted for alice through bob's key is refused by the MCP proxy", async () => {
    const { alice, bob } = await aliceAndBob();
    const path = "/api/v1/mcp/servers/mcp_000000000000000000000000/mcp";
    const requestId = randomUUID();
    const assertion = await new InternalAssertions(stack.assertionSecret).sign(
      {
        org: alice.org,
        user: "alice",
        keyId: bob.id,
        permissions: ["mcp:call"],
        credential: "api_key",
        onBehalfOf: true,
        endUser: true,
      },
      { method: "POST", path, requestId },
    );
    const res = await fetch(`${stack.gatewayUrl}${path}`, {
      method: "POST",
      headers: {
        [ASSERTION_HEADER]: assertion,
        "x-request-id": requestId,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    expect(res.status).toBe(403);
    expect((await res.json()).message).toBe(refusal("The user this call acts for", "alice"));
  });
});
