import { describe, expect, it } from "vitest";
import { InternalAssertions, InvalidAssertion } from "../src/internal-assertion.ts";
import type { Principal } from "../src/principal.ts";

const assertions = new InternalAssertions("s".repeat(40));
const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_1",
  permissions: ["conversations:read"],
  credential: "api_key",
  onBehalfOf: false,
};

describe("the internal assertion", () => {
  it("stays small however long the path is, and is bound to that exact path", async () => {
    const path = `/api/v1/llm/conversations/${"a".repeat(8000)}?x=1`;
    const request = { method: "GET", path, requestId: "rid-1" };
    const assertion = await assertions.sign(principal, request);
    expect(assertion.length).toBeLessThan(1024);
    expect((await assertions.verify(assertion, request)).principal).toEqual({
      ...principal,
      endUser: principal.onBehalfOf,
    });

    for (const other of [`${path}2`, path.slice(0, -1), path.replace("x=1", "x=2"), path.toUpperCase()]) {
      await expect(assertions.verify(assertion, { ...request, path: other })).rejects.toThrow(
        InvalidAssertion,
      );
    }
    await expect(assertions.verify(assertion, { ...request, method: "POST" })).rejects.toThrow(
      "made for another request",
    );
  });

  it("carries whether the user is an end user (a token's subject other than the key's owner)", async () => {
    const request = { method: "GET", path: "/api/v1/usage", requestId: "rid-2" };
    const endUser = { ...principal, credential: "jwt" as const, endUser: true };
    const verified = await assertions.verify(await assertions.sign(endUser, request), request);
    expect(verified.principal).toEqual(endUser);
  });
});
