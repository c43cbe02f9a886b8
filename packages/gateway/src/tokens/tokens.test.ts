import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  importJWK,
  jwtVerify,
  SignJWT,
} from "jose";
import { describe, expect, it, vi } from "vitest";
import { newOrg } from "../../test/authorization-helpers.ts";
import { useGateway } from "../../test/harness.ts";
import { oneSecondAfter } from "../../test/propagation.ts";
import { generateSigningJwk } from "./signing-keys.ts";

const gw = useGateway();
const EXCHANGE = "/api/v1/authentication/api-keys/exchange-token";
const WHOAMI = "/api/v1/authentication/whoami";
const AUDIENCE = "https://agents.example.com/api";

async function exchange(secret: string, body: Record<string, unknown>) {
  return gw.call(EXCHANGE, { method: "POST", bearer: secret, json: body });
}

async function mint(secret: string, body: Record<string, unknown> = {}) {
  const res = await exchange(secret, { audience: gw.publicUrl, externalUserId: "alice", ...body });
  expect(res.status).toBe(200);
  return (await res.json()).token as string;
}

/** A token signed with the gateway's own key but with claims of the test's choosing. */
async function forge(
  claims: Record<string, unknown>,
  options: { kid?: string; jwk?: Record<string, unknown> } = {},
) {
  const jwk = options.jwk ?? gw.signingJwk;
  const key = await importJWK(jwk, "ES256");
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ org: "o", key_id: "k", permissions: [], ...claims })
    .setProtectedHeader({ alg: "ES256", kid: options.kid ?? (jwk.kid as string) })
    .setIssuer((claims.iss as string) ?? gw.publicUrl)
    .setSubject((claims.sub as string) ?? "alice")
    .setAudience((claims.aud as string) ?? gw.publicUrl)
    .setIssuedAt((claims.iat as number) ?? now)
    .setNotBefore((claims.nbf as number) ?? now)
    .setExpirationTime((claims.exp as number) ?? now + 600)
    .setJti("test")
    .sign(key);
}

describe("token exchange", () => {
  it("mints a token a third-party audience verifies with the published JWKS", async () => {
    const { record, secret } = await gw.createKey({ permissions: ["authorization:read", "responses:read"] });
    const res = await exchange(secret, {
      audience: AUDIENCE,
      externalUserId: "alice",
      permissions: ["authorization:read"],
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(Object.keys(body)).toEqual(["token"]);

    const discovery = await (await gw.call("/.well-known/openid-configuration")).json();
    expect(discovery).toMatchObject({
      issuer: gw.publicUrl,
      jwks_uri: `${gw.publicUrl}/.well-known/jwks.json`,
      id_token_signing_alg_values_supported: ["ES256", "EdDSA"],
    });
    const jwksResponse = await gw.call("/.well-known/jwks.json");
    expect(jwksResponse.headers.get("cache-control")).toMatch(/public/);
    const jwks = await jwksResponse.json();
    expect(JSON.stringify(jwks)).not.toMatch(/"d":/);

    // What the audience does: fetch the JWKS over HTTP and verify with a stock library.
    const remote = createRemoteJWKSet(new URL(`${gw.url}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await jwtVerify(body.token, remote, {
      issuer: gw.publicUrl,
      audience: AUDIENCE,
    });
    expect(protectedHeader).toMatchObject({ alg: "ES256", kid: gw.signingJwk.kid });
    expect(payload).toMatchObject({
      iss: gw.publicUrl,
      sub: "alice",
      aud: AUDIENCE,
      org: record.org,
      key_id: record.id,
      permissions: ["authorization:read"],
    });
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.nbf).toBe(payload.iat);
    expect(payload.jti).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("embeds all of the key's permissions when none are asked for, and honours expiresIn", async () => {
    const { secret } = await gw.createKey({ permissions: ["usage:read", "authorization:read"] });
    const res = await exchange(secret, { audience: AUDIENCE, externalUserId: "bob", expiresIn: 300 });
    const jwks = createLocalJWKSet(await (await gw.call("/.well-known/jwks.json")).json());
    const { payload } = await jwtVerify((await res.json()).token, jwks, { audience: AUDIENCE });
    expect(payload.permissions).toEqual(["usage:read", "authorization:read"]);
    expect(payload.exp! - payload.iat!).toBe(300);
  });

  it.each([
    [{ expiresIn: 299 }, ["body", "expiresIn"], "greater_than_equal"],
    [{ expiresIn: 2_592_001 }, ["body", "expiresIn"], "less_than_equal"],
    [{ expiresIn: 600.5 }, ["body", "expiresIn"], "int_type"],
    [{ expiresIn: "600" }, ["body", "expiresIn"], "int_type"],
    [{ audience: undefined }, ["body", "audience"], "missing"],
    [{ externalUserId: undefined }, ["body", "externalUserId"], "missing"],
    [{ audience: "not a url" }, ["body", "audience"], "url_parsing"],
    [{ audience: "/relative/path" }, ["body", "audience"], "url_parsing"],
    [{ audience: "ftp://files.example.com" }, ["body", "audience"], "url_parsing"],
    [{ externalUserId: "" }, ["body", "externalUserId"], "string_too_short"],
    [{ externalUserId: "u".repeat(257) }, ["body", "externalUserId"], "string_too_long"],
    [{ permissions: ["usage:read", "usage:read"] }, ["body", "permissions"], "value_error"],
    [{ scope: "all" }, ["body", "scope"], "extra_forbidden"],
  ])("%j → 422 at %j (%s)", async (change, loc, type) => {
    const { secret } = await gw.createKey();
    const body = { audience: AUDIENCE, externalUserId: "alice", ...change };
    const res = await exchange(secret, body);
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([expect.objectContaining({ loc, type })]);
  });

  it.each([300, 2_592_000])("accepts expiresIn %i", async (expiresIn) => {
    const { secret } = await gw.createKey();
    expect((await exchange(secret, { audience: AUDIENCE, externalUserId: "alice", expiresIn })).status).toBe(
      200,
    );
  });

  it("refuses permissions beyond the key's with 403 naming the excess", async () => {
    const { secret } = await gw.createKey({ permissions: ["authorization:read"] });
    const res = await exchange(secret, {
      audience: AUDIENCE,
      externalUserId: "alice",
      permissions: ["authorization:read", "authorization:write", "fly"],
    });
    expect(res.status).toBe(403);
    const { message } = await res.json();
    expect(message).toContain("authorization:write");
    expect(message).toContain("fly");
    expect(message).not.toMatch(/authorization:read[,)]/);
  });

  it("never delegates key administration: not on request, not by default, and a token cannot manage keys", async () => {
    const { secret } = await gw.createKey({ permissions: ["admin:api-keys", "usage:read"] });
    const asked = await exchange(secret, {
      audience: AUDIENCE,
      externalUserId: "alice",
      permissions: ["admin:api-keys"],
    });
    expect(asked.status).toBe(403);
    expect((await asked.json()).message).toContain("admin:api-keys");
    const token = await mint(secret);
    expect((await (await gw.call(WHOAMI, { bearer: token })).json()).permissions).toEqual(["usage:read"]);
    const create = await gw.call("/api/v1/admin/api-keys", {
      method: "POST",
      bearer: token,
      json: { owner: "x" },
    });
    expect(create.status).toBe(403);
    expect((await create.json()).message).toMatch(/API key, not a token/);
  });

  it("a token cannot mint tokens", async () => {
    const { secret } = await gw.createKey();
    const token = await mint(secret);
    const res = await gw.call(EXCHANGE, {
      method: "POST",
      bearer: token,
      json: { audience: AUDIENCE, externalUserId: "x" },
    });
    expect(res.status).toBe(403);
  });
});

describe("tokens as bearer credentials", () => {
  it("act as the end user with the token's permissions: whoami, an authorization check, a refused grant", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const token = await mint(o.secret, { permissions: ["authorization:read"] });

    const whoami = await (await gw.call(WHOAMI, { bearer: token })).json();
    expect(whoami).toEqual({
      org: o.org,
      user: "alice",
      keyId: o.keyId,
      permissions: ["authorization:read"],
      credential: "jwt",
      onBehalfOf: false,
      endUser: true,
      actsAsKeyOwner: false,
    });
    const check = await gw.call(
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=owner`,
      {
        bearer: token,
      },
    );
    expect(await check.json()).toEqual({ allowed: true });
    const grant = await gw.call("/api/v1/authorization/llm/grant", {
      method: "POST",
      bearer: token,
      json: { resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" },
    });
    expect(grant.status).toBe(403);
    expect((await grant.json()).message).toContain("authorization:write");
  });

  it("X-On-Behalf-Of must name the token's subject", async () => {
    const { secret } = await gw.createKey();
    const token = await mint(secret);
    expect((await gw.call(WHOAMI, { bearer: token, headers: { "x-on-behalf-of": "alice" } })).status).toBe(
      200,
    );
    const other = await gw.call(WHOAMI, { bearer: token, headers: { "x-on-behalf-of": "mallory" } });
    expect(other.status).toBe(403);
  });

  it("never carry more than the key still has", async () => {
    const { record, secret } = await gw.createKey({ permissions: ["authorization:read", "usage:read"] });
    const token = await mint(secret);
    await gw.store.update(record.id, { permissions: ["usage:read"] });
    await vi.waitFor(
      async () =>
        expect((await (await gw.call(WHOAMI, { bearer: token })).json()).permissions).toEqual(["usage:read"]),
      { timeout: 1_000, interval: 20 },
    );
  });

  it("count against the key that issued them", async () => {
    const { secret } = await gw.createKey({ limits: { minute: 3 } });
    const token = await mint(secret); // 1
    expect((await gw.call(WHOAMI, { bearer: token })).status).toBe(200); // 2
    expect((await gw.call(WHOAMI, { bearer: token })).status).toBe(200); // 3
    const refused = await gw.call(WHOAMI, { bearer: token });
    expect(refused.status).toBe(429);
    expect(await refused.text()).toBe('{"error":"Rate limit exceeded"}');
    expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(429);
  });

  describe("are refused with 401", () => {
    const expect401 = async (token: string, message: RegExp) => {
      const res = await gw.call(WHOAMI, { bearer: token });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect((await res.json()).message).toMatch(message);
    };
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");

    it("alg none", async () => {
      const { secret } = await gw.createKey();
      const payload = (await mint(secret)).split(".")[1];
      await expect401(`${b64({ alg: "none", typ: "JWT" })}.${payload}.`, /algorithm|malformed/i);
    });

    it("HS256 signed with the public key as the secret", async () => {
      const { record } = await gw.createKey();
      const publicJwk = {
        kty: gw.signingJwk.kty,
        crv: gw.signingJwk.crv,
        x: gw.signingJwk.x,
        y: gw.signingJwk.y,
      };
      const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
      const now = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ org: record.org, key_id: record.id, permissions: [] })
        .setProtectedHeader({ alg: "HS256", kid: gw.signingJwk.kid! })
        .setIssuer(gw.publicUrl)
        .setSubject("alice")
        .setAudience(gw.publicUrl)
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + 600)
        .setJti("x")
        .sign(secret);
      await expect401(token, /algorithm/i);
    });

    it("a tampered payload", async () => {
      const { secret } = await gw.createKey({ permissions: ["usage:read"] });
      const [header, payload, signature] = (await mint(secret)).split(".") as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
      claims.permissions = ["admin:api-keys"];
      await expect401(`${header}.${b64(claims)}.${signature}`, /signature/i);
    });

    it("expired (beyond the 30 s skew), and not yet valid", async () => {
      const { record } = await gw.createKey();
      const now = Math.floor(Date.now() / 1000);
      const base = { org: record.org, key_id: record.id };
      await expect401(await forge({ ...base, iat: now - 700, nbf: now - 700, exp: now - 40 }), /expired/i);
      await expect401(await forge({ ...base, nbf: now + 120, iat: now }), /not valid yet/i);
      // Within the tolerated skew both pass.
      expect(
        (
          await gw.call(WHOAMI, {
            bearer: await forge({ ...base, iat: now - 700, nbf: now - 700, exp: now - 10 }),
          })
        ).status,
      ).toBe(200);
      expect((await gw.call(WHOAMI, { bearer: await forge({ ...base, nbf: now + 10 }) })).status).toBe(200);
    });

    it("whose subject breaks the rules of externalUserId, or issued in the future beyond the skew", async () => {
      const { record } = await gw.createKey();
      const base = { org: record.org, key_id: record.id };
      for (const sub of ["", "x".repeat(257), "bob\nadmin", "caf\u00e9", "\u0000"]) {
        await expect401(await forge({ ...base, sub }), /'sub'|malformed|claim/i);
      }
      const now = Math.floor(Date.now() / 1000);
      await expect401(await forge({ ...base, iat: now + 120 }), /'iat'/);
      // At the limits: 256 printable characters, and iat within the tolerated skew.
      expect((await gw.call(WHOAMI, { bearer: await forge({ ...base, sub: "x".repeat(256) }) })).status).toBe(
        200,
      );
      expect((await gw.call(WHOAMI, { bearer: await forge({ ...base, iat: now + 10 }) })).status).toBe(200);
    });

    it("addressed to another audience", async () => {
      const { secret } = await gw.createKey();
      const res = await exchange(secret, { audience: AUDIENCE, externalUserId: "alice" });
      await expect401((await res.json()).token, /not addressed to this gateway/);
    });

    it("signed by a key the gateway does not publish", async () => {
      const { record } = await gw.createKey();
      const stranger = await generateSigningJwk();
      await expect401(await forge({ org: record.org, key_id: record.id }, { jwk: stranger }), /unknown/i);
      await expect401(
        await forge(
          { org: record.org, key_id: record.id },
          { jwk: stranger, kid: gw.signingJwk.kid as string },
        ),
        /signature/i,
      );
    });

    it("whose issuing key is revoked (within a second), unknown, or of another organization", async () => {
      const { record, secret } = await gw.createKey();
      const token = await mint(secret);
      expect((await gw.call(WHOAMI, { bearer: token })).status).toBe(200);
      await gw.store.revoke(record.id);
      await oneSecondAfter(Date.now());
      expect((await gw.call(WHOAMI, { bearer: token })).status).toBe(401);

      await expect401(
        await forge({ org: record.org, key_id: "key_000000000000000000000000" }),
        /does not exist/,
      );
      const other = await gw.createKey();
      await expect401(await forge({ org: "some-other-org", key_id: other.record.id }), /does not exist/);
    });
  });

  it("counts verifications and exchanges in metrics", async () => {
    const { record, secret } = await gw.createKey();
    const token = await mint(secret);
    expect(decodeProtectedHeader(token).kid).toBe(gw.signingJwk.kid);
    expect((await gw.call(WHOAMI, { bearer: token })).status).toBe(200);
    const now = Math.floor(Date.now() / 1000);
    const expired = await forge({
      org: record.org,
      key_id: record.id,
      iat: now - 700,
      nbf: now - 700,
      exp: now - 60,
    });
    expect((await gw.call(WHOAMI, { bearer: expired })).status).toBe(401);
    const metrics = await (await gw.call("/metrics")).text();
    expect(metrics).toMatch(/gateway_token_exchanges_total\{outcome="issued"\} [1-9]/);
    expect(metrics).toMatch(/gateway_jwt_verifications_total\{outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(/gateway_jwt_verifications_total\{outcome="expired"\} [1-9]/);
  });
});
