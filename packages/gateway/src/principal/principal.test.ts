import { describe, expect, it } from "vitest";
import { useGateway } from "../../test/harness.ts";

const gw = useGateway();
const WHOAMI = "/api/v1/authentication/whoami";

describe("principal", () => {
  it("is the key's owner without X-On-Behalf-Of, and carries no secret", async () => {
    const { record, secret } = await gw.createKey({ owner: "alice", permissions: ["authorization:read"] });
    const res = await gw.call(WHOAMI, { bearer: secret });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toEqual({
      org: record.org,
      user: "alice",
      keyId: record.id,
      permissions: ["authorization:read"],
      credential: "api_key",
      onBehalfOf: false,
      endUser: false,
      actsAsKeyOwner: false,
    });
    expect(JSON.stringify(body)).not.toContain(secret);
    expect(JSON.stringify(body)).not.toContain(record.hash);
  });

  it("is the end user named in X-On-Behalf-Of, in the key's organization", async () => {
    const { record, secret } = await gw.createKey({ owner: "backend" });
    const res = await gw.call(WHOAMI, {
      bearer: secret,
      headers: { "x-on-behalf-of": "end-user 42@example.com" },
    });
    expect(await res.json()).toMatchObject({
      org: record.org,
      user: "end-user 42@example.com",
      onBehalfOf: true,
    });
  });

  it("accepts 256 characters", async () => {
    const { secret } = await gw.createKey();
    const res = await gw.call(WHOAMI, { bearer: secret, headers: { "x-on-behalf-of": "u".repeat(256) } });
    expect(res.status).toBe(200);
    expect((await res.json()).user).toHaveLength(256);
  });

  it.each([
    ["empty", "", "string_too_short"],
    ["257 characters", "u".repeat(257), "string_too_long"],
    ["a control character", "bad\tuser", "string_pattern_mismatch"],
    ["a non-ASCII character", "b\u00e9a", "string_pattern_mismatch"],
  ])("answers 422 for an X-On-Behalf-Of that is %s", async (_name, value, type) => {
    const { secret } = await gw.createKey();
    const res = await gw.call(WHOAMI, {
      bearer: secret,
      headers: { "x-on-behalf-of": Buffer.from(value, "latin1").toString("latin1") },
    });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.detail).toHaveLength(1);
    expect(body.detail[0]).toMatchObject({ loc: ["header", "x-on-behalf-of"], type });
    expect(typeof body.detail[0].msg).toBe("string");
  });

  it("echoes a UTF-8 X-On-Behalf-Of in its 422 as it was sent, not as Node's latin1 reading of its bytes", async () => {
    const { secret } = await gw.createKey();
    const res = await gw.call(WHOAMI, {
      bearer: secret,
      // fetch sends each character of a header as one byte: these are the UTF-8 bytes of "café".
      headers: { "x-on-behalf-of": Buffer.from("café", "utf8").toString("latin1") },
    });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([
      expect.objectContaining({
        loc: ["header", "x-on-behalf-of"],
        type: "string_pattern_mismatch",
        input: "café",
      }),
    ]);
  });

  it("is never `*`, which stands for everyone in a grant: as X-On-Behalf-Of, a key's owner or a token's subject", async () => {
    const { secret } = await gw.createKey({ owner: "root", permissions: ["admin:api-keys"] });
    const everyone = "'*' stands for everyone in a grant: it cannot be a user's own id";
    const asked = await gw.call(WHOAMI, { bearer: secret, headers: { "x-on-behalf-of": "*" } });
    expect(asked.status).toBe(422);
    expect((await asked.json()).detail).toEqual([
      expect.objectContaining({ loc: ["header", "x-on-behalf-of"], msg: everyone }),
    ]);
    const key = await gw.call("/api/v1/admin/api-keys", {
      bearer: secret,
      method: "POST",
      json: { owner: "*" },
    });
    expect(key.status).toBe(422);
    expect((await key.json()).detail).toEqual([
      expect.objectContaining({ loc: ["body", "owner"], msg: everyone }),
    ]);
    const token = await gw.call("/api/v1/authentication/api-keys/exchange-token", {
      bearer: (await gw.createKey()).secret,
      method: "POST",
      json: { audience: gw.publicUrl, externalUserId: "*" },
    });
    expect(token.status).toBe(422);
    expect((await token.json()).detail).toEqual([
      expect.objectContaining({ loc: ["body", "externalUserId"], msg: everyone }),
    ]);
  });

  it("checks the credential before the header: a bad header without a key is a 401", async () => {
    const res = await gw.call(WHOAMI, { headers: { "x-on-behalf-of": "" } });
    expect(res.status).toBe(401);
  });
});
