import { mkdtemp, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { capturingLogger, RUN_TO_EXIT_TEST_TIMEOUT_MS, runToExit } from "@gw/test-kit";
import { createLocalJWKSet, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { developmentSigningKeys, generateSigningJwk, loadSigningKeys } from "./signing-keys.ts";
import { TokenService } from "./tokens.ts";

const ISSUER = "https://gateway.test";
const claims = { sub: "alice", aud: "https://app.test", org: "acme", keyId: "key_1", permissions: [] };
const publicOnly = ({ d: _d, ...rest }: Record<string, unknown>) => rest;

describe("signing keys from configuration", () => {
  it.each([
    ["not JSON", "{", /not valid JSON/],
    ["an empty set", '{"keys":[]}', /no keys/],
    ["a key without kid", JSON.stringify({ keys: [{ kty: "EC", alg: "ES256" }] }), /kid/],
    [
      "an HMAC key",
      JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0", kid: "h", alg: "HS256" }] }),
      /alg must be one of/,
    ],
    [
      "alg none",
      JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0", kid: "n", alg: "none" }] }),
      /alg must be one of/,
    ],
  ])("refuses %s", async (_name, json, message) => {
    await expect(loadSigningKeys(json)).rejects.toThrow(message);
  });

  it("refuses duplicate kids, a key that does not match its alg, and a set that cannot sign", async () => {
    const a = await generateSigningJwk();
    await expect(loadSigningKeys(JSON.stringify([a, a]))).rejects.toThrow(/twice/);
    const ed = await generateSigningJwk("EdDSA");
    await expect(loadSigningKeys(JSON.stringify([{ ...ed, alg: "ES256" }]))).rejects.toThrow();
    await expect(loadSigningKeys(JSON.stringify([publicOnly(a)]))).rejects.toThrow(/to sign with/);
    await expect(loadSigningKeys(JSON.stringify([a, publicOnly(ed)]), ed.kid)).rejects.toThrow(/cannot sign/);
  });

  it.concurrent.each([
    [
      "JWT_SIGNING_KEYS",
      { JWT_SIGNING_KEYS: "{bad" },
      /^ {2}- JWT_SIGNING_KEYS: JWT signing keys are not valid JSON$/m,
    ],
    [
      "JWT_SIGNING_KEYS_FILE",
      { JWT_SIGNING_KEYS_FILE: "/nonexistent/keys.json" },
      /^ {2}- JWT_SIGNING_KEYS_FILE: cannot be read \(ENOENT\)$/m,
    ],
    [
      "JWT_ACTIVE_KID",
      { JWT_ACTIVE_KID: "nope" },
      /^ {2}- JWT_ACTIVE_KID: JWT signing keys: no key nope to sign with$/m,
    ],
    // Not a key set, but found as the start goes too: the vault's keys, which production must be given.
    ["VAULT_KEYS", { NODE_ENV: "production" }, /^ {2}- VAULT_KEYS: required in production/m],
  ])(
    "the gateway with a %s that cannot be used exits 78 naming it, before connecting to anything",
    async (_name, settings, named) => {
      const keys = JSON.stringify({ keys: [await generateSigningJwk()] });
      const failed = await runToExit(resolve(import.meta.dirname, "../main.ts"), {
        PATH: process.env.PATH,
        DATA_DIR: await mkdtemp(join(tmpdir(), "gw-keys-")),
        // Nothing listens here: a gateway that went on would fail otherwise, not with 78.
        REDIS_URL: "redis://127.0.0.1:9",
        DATABASE_URL: "postgres://gateway@127.0.0.1:9/gateway",
        SPICEDB_ENDPOINT: "127.0.0.1:9",
        SPICEDB_PRESHARED_KEY: "development-key",
        ...("JWT_ACTIVE_KID" in settings ? { JWT_SIGNING_KEYS: keys } : {}),
        ...settings,
      });
      expect(failed.code).toBe(78);
      expect(failed.stderr).toMatch(/^Invalid configuration:\n/);
      expect(failed.stderr).toMatch(named);
    },
    RUN_TO_EXIT_TEST_TIMEOUT_MS,
  );

  it("publishes only public halves", async () => {
    const keys = await loadSigningKeys(JSON.stringify({ keys: [await generateSigningJwk()] }));
    expect(JSON.stringify(keys.publicJwks)).not.toMatch(/"d"/);
    expect(keys.publicJwks[0]).toMatchObject({ use: "sig", alg: "ES256" });
  });

  it("EdDSA keys sign too", async () => {
    const ed = await generateSigningJwk("EdDSA");
    const tokens = new TokenService(await loadSigningKeys(JSON.stringify([ed])), ISSUER);
    const token = await tokens.sign(claims, 300);
    expect((await tokens.verify(token, "https://app.test")).sub).toBe("alice");
  });
});

describe("rotation", () => {
  it("tokens signed by the old key verify while it is published; new ones carry the new kid", async () => {
    const oldKey = await generateSigningJwk();
    const newKey = await generateSigningJwk();
    const before = new TokenService(await loadSigningKeys(JSON.stringify([oldKey])), ISSUER);
    const oldToken = await before.sign(claims, 300);

    // The new key signs; the old one is still published, now without its private half.
    const during = new TokenService(
      await loadSigningKeys(JSON.stringify([newKey, publicOnly(oldKey)]), newKey.kid),
      ISSUER,
    );
    expect((await during.verify(oldToken, claims.aud)).sub).toBe("alice");
    const newToken = await during.sign(claims, 300);
    const jwks = createLocalJWKSet({ keys: during.publicJwks });
    const { protectedHeader } = await jwtVerify(newToken, jwks, { issuer: ISSUER });
    expect(protectedHeader.kid).toBe(newKey.kid);
    expect(during.publicJwks.map((k) => k.kid)).toEqual([newKey.kid, oldKey.kid]);

    // Once the old key is withdrawn, its tokens stop working.
    const after = new TokenService(await loadSigningKeys(JSON.stringify([newKey])), ISSUER);
    await expect(after.verify(oldToken, claims.aud)).rejects.toMatchObject({ reason: "unknown_key" });
  });
});

describe("development signing key", () => {
  it("is created once under DATA_DIR, private to its owner, kept across restarts, and flagged in the log", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-jwt-"));
    const { logger, lines } = capturingLogger("warn");
    const file = join(dir, "jwt", "development-signing-keys.json");
    const first = await developmentSigningKeys(file, logger);
    const second = await developmentSigningKeys(file, logger);
    expect(second.active.kid).toBe(first.active.kid);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const token = await new TokenService(first, ISSUER).sign(claims, 300);
    expect((await new TokenService(second, ISSUER).verify(token, claims.aud)).sub).toBe("alice");
    expect(lines.join("")).toMatch(/production must configure JWT_SIGNING_KEYS/);
  });
});
