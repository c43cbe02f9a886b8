import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.ts";
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

  it("is bound to its own short path among many, before and after the digests it remembers start over", async () => {
    const paths = Array.from({ length: 1_100 }, (_, i) => `/api/v1/llm/responses/resp_${i}`);
    const signed = await Promise.all(
      paths.map((path, i) => assertions.sign(principal, { method: "GET", path, requestId: `rid-${i}` })),
    );
    for (const i of [0, 1, 511, 1_023, 1_024, 1_099]) {
      const request = { method: "GET", path: paths[i]!, requestId: `rid-${i}` };
      expect((await assertions.verify(signed[i]!, request)).principal.org).toBe("acme");
      const neighbour = paths[(i + 1) % paths.length]!;
      await expect(assertions.verify(signed[i]!, { ...request, path: neighbour })).rejects.toThrow(
        "made for another request",
      );
    }
  });

  it("carries whether the user is an end user (a token's subject other than the key's owner)", async () => {
    const request = { method: "GET", path: "/api/v1/usage", requestId: "rid-2" };
    const endUser = { ...principal, credential: "jwt" as const, endUser: true };
    const verified = await assertions.verify(await assertions.sign(endUser, request), request);
    expect(verified.principal).toEqual(endUser);
  });

  it("carries the key's response cache setting; none when it is off", async () => {
    const request = { method: "POST", path: "/api/v1/llm/responses", requestId: "rid-cache" };
    for (const cache of ["principal", "key"] as const) {
      const cached = { ...principal, cache, endUser: false };
      const verified = await assertions.verify(await assertions.sign(cached, request), request);
      expect(verified.principal).toEqual(cached);
    }
    const off = await assertions.verify(await assertions.sign(principal, request), request);
    expect(off.principal).not.toHaveProperty("cache");
  });

  it("is a standard HS256 JWT: anything altered, another algorithm or a stale one is refused", async () => {
    const secret = "k".repeat(40);
    const clock = new ManualClock();
    const own = new InternalAssertions(secret, clock);
    const request = { method: "POST", path: "/api/v1/llm/responses", requestId: "rid-3" };
    const assertion = await own.sign(principal, request);
    const [header, payload, signature] = assertion.split(".") as [string, string, string];
    const json = (part: string) => JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
    expect(json(header)).toEqual({ alg: "HS256", typ: "JWT" });
    const claims = json(payload);
    expect(claims).toMatchObject({
      iss: "llm-gateway",
      aud: "llm-gateway-service",
      sub: "alice",
      org: "acme",
    });
    expect(claims.exp - claims.iat).toBe(30);
    // The signature is HMAC-SHA256 of header and payload under the shared secret, as RFC 7515 says.
    expect(signature).toBe(createHmac("sha256", secret).update(`${header}.${payload}`).digest("base64url"));
    expect((await own.verify(assertion, request)).principal.org).toBe("acme");

    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const signedAs = (h: unknown, p: unknown) => {
      const body = `${encode(h)}.${encode(p)}`;
      return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
    };
    const refused = [
      `${header}.${encode({ ...claims, org: "other" })}.${signature}`, // payload altered
      `${header}.${payload}.${signature.slice(0, -2)}`, // signature cut
      `${encode({ alg: "none", typ: "JWT" })}.${payload}.`, // unsigned
      signedAs({ alg: "HS512", typ: "JWT" }, claims), // another algorithm named
      signedAs({ alg: "HS256", typ: "JWT", crit: ["x"] }, claims),
      signedAs({ alg: "HS256" }, { ...claims, iss: "someone" }),
      signedAs({ alg: "HS256" }, { ...claims, aud: "elsewhere" }),
      signedAs({ alg: "HS256" }, { ...claims, jti: undefined }),
      signedAs({ alg: "HS256" }, { ...claims, nbf: claims.iat + 60 }),
      `${assertion}.x`,
      "not-a-jwt",
    ];
    for (const forged of refused)
      await expect(own.verify(forged, request)).rejects.toThrow(
        "Gateway assertion refused: assertion invalid",
      );
    // Another implementation's token with the same claims (audience as a list) is as good.
    expect(
      (await own.verify(signedAs({ alg: "HS256" }, { ...claims, aud: [claims.aud] }), request)).jti,
    ).toBe(claims.jti);

    clock.advance(34_000); // 30 s of life and up to 5 s of skew
    expect((await own.verify(assertion, request)).jti).toBe(claims.jti);
    clock.advance(1_000);
    await expect(own.verify(assertion, request)).rejects.toThrow("assertion expired");
  });
});
