import { randomBytes } from "node:crypto";
import type { Permission } from "@gw/core/permissions";
import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const PATH = "/api/v1/providers/credentials";
const newKey = () => `sk-test-${randomBytes(24).toString("hex")}`;

describe("organizations' provider keys (PUT, GET, DELETE /api/v1/providers/credentials)", () => {
  const logLines: string[] = [];
  const stack = useStack({}, {}, logLines);
  /** Every key a test stored or tried to: none may appear in an answer, a log line or the audit trail. */
  const typed: string[] = [];
  const adminOf = (org?: string, permissions: Permission[] = ["admin:api-keys"]) =>
    stack.createKey({ ...(org ? { org } : {}), permissions });
  const put = (secret: string, provider: string, body: unknown) =>
    stack.call(secret, `${PATH}/${provider}`, { method: "PUT", json: body });
  /** An answer's text, checked for every key typed so far. */
  async function textOf(res: Response): Promise<string> {
    const text = await res.text();
    for (const key of typed) expect(text).not.toContain(key);
    return text;
  }

  it("stores, lists and deletes an organization's keys, showing only their last four characters", async () => {
    const admin = await adminOf();
    const [openai, anthropic] = [newKey(), newKey()];
    typed.push(openai, anthropic);

    const stored = await put(admin.secret, "openai", { api_key: openai, base_url: "https://1.1.1.1/v1/" });
    expect(stored.status).toBe(200);
    const view = JSON.parse(await textOf(stored));
    expect(view).toEqual({
      object: "provider.credential",
      provider: "openai",
      api_key_last4: openai.slice(-4),
      base_url: "https://1.1.1.1/v1",
      created_at: expect.any(Number),
      updated_at: view.created_at,
      first_used_at: null,
    });
    expect((await put(admin.secret, "anthropic", { api_key: anthropic })).status).toBe(200);

    const listed = await stack.call(admin.secret, PATH);
    expect(listed.status).toBe(200);
    const list = JSON.parse(await textOf(listed));
    expect(list.object).toBe("list");
    expect(
      list.data.map((k: { provider: string; api_key_last4: string }) => [k.provider, k.api_key_last4]),
    ).toEqual([
      ["anthropic", anthropic.slice(-4)],
      ["openai", openai.slice(-4)],
    ]);

    // Stored again: the new key replaces the old, and its base_url goes with it.
    const replaced = newKey();
    typed.push(replaced);
    const again = JSON.parse(await textOf(await put(admin.secret, "openai", { api_key: replaced })));
    expect(again).toMatchObject({
      api_key_last4: replaced.slice(-4),
      base_url: null,
      created_at: view.created_at,
    });

    const deleted = await stack.call(admin.secret, `${PATH}/openai`, { method: "DELETE" });
    expect(deleted.status).toBe(204);
    expect(await deleted.text()).toBe("");
    await expectJsonError(await stack.call(admin.secret, `${PATH}/openai`, { method: "DELETE" }), 404);
    const left = await (await stack.call(admin.secret, PATH)).json();
    expect(left.data.map((k: { provider: string }) => k.provider)).toEqual(["anthropic"]);
  });

  it("writing or deleting needs admin:api-keys; reading, admin:api-keys or admin:console", async () => {
    const admin = await adminOf();
    const key = newKey();
    typed.push(key);
    expect((await put(admin.secret, "azure", { api_key: key, base_url: "https://1.1.1.1" })).status).toBe(
      200,
    );

    const plain = await stack.createKey({ org: admin.org });
    const consoleOnly = await adminOf(admin.org, ["admin:console"]);
    for (const secret of [plain.secret, consoleOnly.secret]) {
      const refused = await expectJsonError(await put(secret, "azure", { api_key: newKey() }), 403);
      expect(JSON.stringify(refused)).toMatch(/admin:api-keys/);
      await expectJsonError(await stack.call(secret, `${PATH}/azure`, { method: "DELETE" }), 403);
    }
    await expectJsonError(await stack.call(plain.secret, PATH), 403);
    const seen = await stack.call(consoleOnly.secret, PATH);
    expect(seen.status).toBe(200);
    expect(JSON.parse(await textOf(seen)).data).toHaveLength(1);
    // The key is still the one the administrator stored.
    expect((await (await stack.call(admin.secret, PATH)).json()).data[0].api_key_last4).toBe(key.slice(-4));
  });

  it("answers 422 for an unknown provider or a bad body, never echoing the key", async () => {
    const admin = await adminOf();
    const key = newKey();
    typed.push(key);
    const unknown = await expectJsonError(await put(admin.secret, "gemini", { api_key: key }), 422);
    expect(unknown.detail).toEqual([expect.objectContaining({ loc: ["path", "provider"] })]);

    const cases: [unknown, (string | number)[]][] = [
      [{}, ["body", "api_key"]],
      [{ api_key: key, apikey: key }, ["body", "apikey"]],
      [{ api_key: key.slice(0, 12) }, ["body", "api_key"]],
      [{ api_key: `${key}\n` }, ["body", "api_key"]],
      [{ api_key: 42 }, ["body", "api_key"]],
      [{ api_key: key, base_url: "http://1.1.1.1/v1" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "https://127.0.0.1/v1" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "https://169.254.169.254" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "https://1.1.1.1/v1?key=x" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "https://user:pw@1.1.1.1/v1" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "ftp://1.1.1.1" }, ["body", "base_url"]],
      [{ api_key: key, base_url: "not a url" }, ["body", "base_url"]],
      [{ api_key: key, base_url: `not a url ${key}@x` }, ["body", "base_url"]],
      [[key], ["body"]],
    ];
    for (const [body, loc] of cases) {
      const res = await put(admin.secret, "openai", body);
      const text = await textOf(res);
      expect(res.status, text).toBe(422);
      expect(JSON.parse(text).detail.map((d: { loc: unknown }) => d.loc)).toContainEqual(loc);
      expect(text).not.toContain(key.slice(0, 12));
    }
    // Credentials in the base URL are not echoed either, and the refusal says where the key goes.
    for (const base_url of [`https://user:${key}@1.1.1.1/v1`, `https://${key}@1.1.1.1/v1?x=1`]) {
      const res = await put(admin.secret, "openai", { api_key: key, base_url });
      const text = await textOf(res);
      expect(res.status).toBe(422);
      expect(text).not.toContain(key.slice(0, 12));
      expect(JSON.parse(text).detail[0]).toMatchObject({
        loc: ["body", "base_url"],
        msg: "Value error, the URL must not carry credentials: send the key as api_key",
        input: expect.stringMatching(/^https:\/\/1\.1\.1\.1\/v1/),
      });
    }
    // A body that is not JSON: the parser's message names the problem, not the text around it.
    const malformed = await fetch(`${stack.gatewayUrl}${PATH}/openai`, {
      method: "PUT",
      headers: { authorization: `Bearer ${admin.secret}`, "content-type": "application/json" },
      body: `{"api_key": ${key}}`,
    });
    expect(malformed.status).toBe(422);
    expect(await textOf(malformed)).not.toContain(key.slice(0, 10));
    const http = await (
      await put(admin.secret, "openai", { api_key: key, base_url: "http://1.1.1.1" })
    ).json();
    expect(http.detail[0].msg).toMatch(/https \(BYOK_ALLOW_PRIVATE_BASE_URLS is off\)/);
    // Nothing was stored by any of them.
    expect((await (await stack.call(admin.secret, PATH)).json()).data).toEqual([]);
  });

  it("an organization never sees, replaces or deletes another's key", async () => {
    const [ours, theirs] = [await adminOf(), await adminOf()];
    const key = newKey();
    typed.push(key);
    expect((await put(ours.secret, "openai", { api_key: key })).status).toBe(200);

    expect((await (await stack.call(theirs.secret, PATH)).json()).data).toEqual([]);
    await expectJsonError(await stack.call(theirs.secret, `${PATH}/openai`, { method: "DELETE" }), 404);
    const own = newKey();
    typed.push(own);
    expect((await put(theirs.secret, "openai", { api_key: own })).status).toBe(200);

    const mine = (await (await stack.call(ours.secret, PATH)).json()).data;
    expect(mine.map((k: { api_key_last4: string }) => k.api_key_last4)).toEqual([key.slice(-4)]);
  });

  it("refuses a gateway token, as key administration does", async () => {
    const admin = await adminOf(undefined, ["admin:api-keys", "responses:write"]);
    const exchanged = await stack.call(admin.secret, "/api/v1/authentication/api-keys/exchange-token", {
      json: { audience: "https://gateway.test", externalUserId: "backend" },
    });
    expect(exchanged.status).toBe(200);
    const { token } = await exchanged.json();
    const key = newKey();
    typed.push(key);
    const refused = await expectJsonError(await put(token, "openai", { api_key: key }), 403);
    expect(JSON.stringify(refused)).toMatch(/API key, not a token/);
  });

  it("audits each write and delete without the key, and no key reached a log line or the audit trail", async () => {
    const admin = await adminOf();
    const key = newKey();
    typed.push(key);
    await put(admin.secret, "anthropic", { api_key: key });
    await stack.call(admin.secret, `${PATH}/anthropic`, { method: "DELETE" });

    const trail = await (
      await stack.call(admin.secret, "/api/v1/admin/audit?resourceType=provider_key")
    ).json();
    expect(
      trail.data.map((r: { action: string; resourceId: string; actor: { keyId: string } }) => [
        r.action,
        r.resourceId,
        r.actor.keyId,
      ]),
    ).toEqual([
      ["delete", "anthropic", admin.id],
      ["store", "anthropic", admin.id],
    ]);

    expect(typed.length).toBeGreaterThan(5);
    const { rows } = await stack.db.query<{ record: string }>(
      "SELECT record::text AS record FROM audit_records",
    );
    expect(rows.length).toBeGreaterThan(0);
    const logs = logLines.join("\n");
    expect(logs).toContain("/api/v1/providers/credentials");
    for (const typedKey of typed) {
      expect(logs).not.toContain(typedKey);
      for (const { record } of rows) expect(record).not.toContain(typedKey);
    }
  });
});
