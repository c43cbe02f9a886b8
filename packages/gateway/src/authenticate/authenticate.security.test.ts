import { scanKeys } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import { useGateway } from "../../test/harness.ts";

const gw = useGateway();
const WHOAMI = "/api/v1/authentication/whoami";
/** Changes made on another connection reach the gateway's key cache by pub/sub, within a second. */
const WITHIN_A_SECOND = { timeout: 1_000, interval: 20 };

async function expect401(res: Response, message: RegExp, code: string) {
  expect(res.status).toBe(401);
  expect(res.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const body = await res.json();
  expect(body).toEqual({ error: "Unauthorized", message: expect.stringMatching(message), code });
}

describe("authentication: every way a credential is refused", () => {
  it("refuses a request without Authorization", async () => {
    await expect401(await gw.call(WHOAMI), /missing/i, "missing_credential");
  });

  it.each([
    ["Basic scheme", "Basic YWxpY2U6c2VjcmV0"],
    ["no credential", "Bearer"],
    ["two credentials", "Bearer abc def"],
    ["credential with a comma", "Bearer abc,def"],
  ])("refuses a malformed header (%s)", async (_name, header) => {
    await expect401(
      await gw.call(WHOAMI, { headers: { authorization: header } }),
      /Bearer <credential>/,
      "malformed_credential",
    );
  });

  it("refuses an unknown key, including one that looks real", async () => {
    await expect401(
      await gw.call(WHOAMI, { bearer: "gwsk_notARealKeyAtAllnotARealKeyAtAll1234567" }),
      /invalid/i,
      "invalid_api_key",
    );
    const { secret } = await gw.createKey();
    await expect401(await gw.call(WHOAMI, { bearer: `${secret}x` }), /invalid/i, "invalid_api_key");
  });

  it("refuses an expired key", async () => {
    const { record, secret } = await gw.createKey({ expiresAt: new Date(Date.now() + 60_000).toISOString() });
    expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(200);
    // Move the expiry into the past directly in Redis: the schema refuses past expiries.
    const stored = {
      ...(await gw.store.get(record.id))!,
      expiresAt: new Date(Date.now() - 1_000).toISOString(),
    };
    await gw.redis.set(`gw:apikey:${record.id}`, JSON.stringify(stored));
    await gw.redis.publish("gw:apikey-events", record.id);
    await vi.waitFor(
      async () => expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(401),
      WITHIN_A_SECOND,
    );
    await expect401(await gw.call(WHOAMI, { bearer: secret }), /expired/i, "expired");
  });

  it("refuses a revoked key", async () => {
    const { record, secret } = await gw.createKey();
    expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(200);
    await gw.store.revoke(record.id);
    await vi.waitFor(
      async () => expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(401),
      WITHIN_A_SECOND,
    );
    await expect401(await gw.call(WHOAMI, { bearer: secret }), /revoked/i, "revoked");
  });

  it("accepts the scheme name in any case, as RFC 7235 says", async () => {
    const { secret } = await gw.createKey();
    expect((await gw.call(WHOAMI, { headers: { authorization: `bearer ${secret}` } })).status).toBe(200);
  });

  it("stores only the SHA-256 of a secret, never the secret", async () => {
    const { record, secret } = await gw.createKey();
    const keys = await scanKeys(gw.redis, "*");
    const dump = (
      await Promise.all(
        keys.map((k) => gw.redis.type(k).then((t) => (t === "string" ? gw.redis.get(k) : ""))),
      )
    )
      .concat(keys)
      .join("\n");
    expect(dump).not.toContain(secret);
    expect(dump).not.toContain(secret.slice(10));
    expect(dump).toContain(record.hash);
    expect(record.hash).toMatch(/^[0-9a-f]{64}$/);
  });
});
