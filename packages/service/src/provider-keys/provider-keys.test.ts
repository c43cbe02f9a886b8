import { randomBytes } from "node:crypto";
import { mkdtemp, readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuditLog } from "@gw/core/audit";
import { systemClock } from "@gw/core/clock";
import { ConfigError } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { type Resolver, UpstreamPolicy, Vault, type VaultKey } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { serviceConfigSchema } from "../config.ts";
import type { ByokProvider, ProviderKeyCaller } from "../llm/provider-keys.ts";
import { startService } from "../server.ts";
import { ProviderKeyStore, type ProviderKeyStoreOptions } from "./store.ts";

/** What an organization's administrator or caller is, as the store's audit records name them. */
const callerOf = (org: string, user = "admin"): ProviderKeyCaller => ({
  principal: { org, user, keyId: `key_${user}`, credential: "api_key" },
  requestId: `req-${randomBytes(4).toString("hex")}`,
});
const newOrg = () => `org-${randomBytes(5).toString("hex")}`;
const newKey = () => `sk-test-${randomBytes(24).toString("hex")}`;
const kek = (id: string): VaultKey => ({ id, key: randomBytes(32) });

describe("organizations' provider keys (the store and keyFor)", () => {
  const database = useTestDatabase();
  /** Two pools: two replicas of the service. */
  let replicaA: Postgres;
  let replicaB: Postgres;
  const stores: ProviderKeyStore[] = [];
  beforeAll(() => {
    replicaA = createPostgres(database.url, { connectionName: "replica-a" });
    replicaB = createPostgres(database.url, { connectionName: "replica-b" });
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all([replicaA.close(), replicaB.close()]);
  });

  const unreadable: { org: string; provider: ByokProvider; reason: string }[] = [];
  function storeOf(
    keys: VaultKey[],
    options: Partial<ProviderKeyStoreOptions> & {
      db?: Postgres;
      resolver?: Resolver;
      allowPrivate?: boolean;
    } = {},
  ) {
    const db = options.db ?? replicaA;
    const store = new ProviderKeyStore(db, new Vault(keys), new AuditLog(db, { retentionMs: undefined }), {
      clock: systemClock,
      policy: new UpstreamPolicy({
        allowPrivate: options.allowPrivate ?? false,
        allowPrivateSetting: "BYOK_ALLOW_PRIVATE_BASE_URLS",
        ...(options.resolver ? { resolver: options.resolver } : {}),
      }),
      connectTimeoutMs: 2_000,
      onUnreadable: (found) => unreadable.push(found),
      ...options,
    });
    stores.push(store);
    return store;
  }

  /** The organization's audit records of its provider keys, oldest first. */
  async function auditOf(org: string) {
    const { rows } = await replicaA.query<{ action: string; resource_id: string; record: unknown }>(
      `SELECT action, resource_id, record FROM audit_records
       WHERE org = $1 AND resource_type = 'provider_key' ORDER BY seq`,
      [org],
    );
    return rows;
  }

  it("seals the key: the row holds no plaintext, and keyFor opens it for its own organization only", async () => {
    const store = storeOf([kek("k1")]);
    const [org, other] = [newOrg(), newOrg()];
    const key = newKey();
    const view = await store.put(callerOf(org), "openai", { apiKey: key, baseUrl: null });
    expect(view).toMatchObject({ provider: "openai", api_key_last4: key.slice(-4), base_url: null });
    expect(JSON.stringify(view)).not.toContain(key);

    const { rows } = await replicaA.query<{ sealed: Buffer; wrapped_key: Buffer }>(
      "SELECT sealed, wrapped_key FROM provider_keys WHERE org = $1",
      [org],
    );
    expect(rows[0]!.sealed.includes(Buffer.from(key))).toBe(false);
    expect(rows[0]!.sealed.includes(Buffer.from(key.slice(8)))).toBe(false);

    expect((await store.keyFor(callerOf(org, "alice"), "openai"))?.apiKey).toBe(key);
    expect(await store.keyFor(callerOf(other, "alice"), "openai")).toBeUndefined();
    expect(await store.keyFor(callerOf(org, "alice"), "anthropic")).toBeUndefined();
    expect(await store.list(other)).toEqual([]);
  });

  it("a sealed key copied to another organization, or pointed at another base_url, does not open", async () => {
    const store = storeOf([kek("k1")]);
    const [org, thief] = [newOrg(), newOrg()];
    await store.put(callerOf(org), "azure", { apiKey: newKey(), baseUrl: "https://acme.openai.azure.com" });
    await replicaA.query(
      `INSERT INTO provider_keys
         (org, provider, base_url, api_key_last4, kek_id, wrapped_key, sealed, revision, created_at, updated_at)
       SELECT $2, provider, base_url, api_key_last4, kek_id, wrapped_key, sealed, revision, created_at, updated_at
       FROM provider_keys WHERE org = $1`,
      [org, thief],
    );
    unreadable.length = 0;
    expect(await store.keyFor(callerOf(thief), "azure")).toBeUndefined();
    await replicaA.query("UPDATE provider_keys SET base_url = 'https://attacker.example' WHERE org = $1", [
      org,
    ]);
    expect(await store.keyFor(callerOf(org), "azure")).toBeUndefined();
    expect(unreadable.map((u) => [u.org, u.provider])).toEqual([
      [thief, "azure"],
      [org, "azure"],
    ]);
  });

  it("after a rotation, a key sealed under the old vault key still opens, and is re-wrapped under the new one", async () => {
    const [old, fresh] = [kek("old"), kek("new")];
    const org = newOrg();
    const key = newKey();
    await storeOf([old]).put(callerOf(org), "anthropic", { apiKey: key, baseUrl: null });
    // Without the old key in VAULT_KEYS it cannot open: the deployment is skipped, nothing is sent.
    expect(await storeOf([fresh]).keyFor(callerOf(org), "anthropic")).toBeUndefined();

    const rotated = storeOf([fresh, old]);
    expect((await rotated.keyFor(callerOf(org), "anthropic"))?.apiKey).toBe(key);
    const { rows } = await replicaA.query<{ kek_id: string }>(
      "SELECT kek_id FROM provider_keys WHERE org = $1",
      [org],
    );
    expect(rows[0]!.kek_id).toBe("new");
    // Once re-wrapped, the old key can go.
    expect((await storeOf([fresh]).keyFor(callerOf(org), "anthropic"))?.apiKey).toBe(key);
  });

  it("audits each store and delete, and the first use after each store once, never with the key", async () => {
    const store = storeOf([kek("k1")]);
    const org = newOrg();
    const [first, second] = [newKey(), newKey()];
    await store.put(callerOf(org), "openai", { apiKey: first, baseUrl: null });
    const used = await store.keyFor(callerOf(org, "alice"), "openai");
    await store.keyFor(callerOf(org, "bob"), "openai");
    expect((await store.list(org))[0]!.first_used_at).toEqual(expect.any(Number));

    await store.put(callerOf(org), "openai", { apiKey: second, baseUrl: null });
    expect((await store.list(org))[0]!.first_used_at).toBeNull();
    const again = await store.keyFor(callerOf(org, "bob"), "openai");
    expect(again?.apiKey).toBe(second);
    expect(again!.changedAt >= used!.changedAt).toBe(true);
    expect(await store.delete(callerOf(org), "openai")).toBe(true);
    expect(await store.delete(callerOf(org), "openai")).toBe(false);
    expect(await store.keyFor(callerOf(org, "bob"), "openai")).toBeUndefined();

    const records = await auditOf(org);
    expect(
      records.map((r) => [r.action, r.resource_id, (r.record as { actor: { userId: string } }).actor.userId]),
    ).toEqual([
      ["store", "openai", "admin"],
      ["first_use", "openai", "alice"],
      ["store", "openai", "admin"],
      ["first_use", "openai", "bob"],
      ["delete", "openai", "admin"],
    ]);
    const everything = JSON.stringify(records);
    expect(everything).not.toContain(first);
    expect(everything).not.toContain(second);
  });

  it("two replicas making the first call after a store at once audit its first use once", async () => {
    const keys = [kek("k1")];
    const org = newOrg();
    await storeOf(keys).put(callerOf(org), "openai", { apiKey: newKey(), baseUrl: null });
    // Both replicas have read the key as not yet used before either claims its first use.
    let arrived = 0;
    let release!: () => void;
    const bothRead = new Promise<void>((resolve) => {
      release = resolve;
    });
    const barrier = async () => {
      if (++arrived === 2) release();
      await bothRead;
    };
    const a = storeOf(keys, { db: replicaA, afterRead: barrier });
    const b = storeOf(keys, { db: replicaB, afterRead: barrier });
    const [fromA, fromB] = await Promise.all([
      a.keyFor(callerOf(org, "alice"), "openai"),
      b.keyFor(callerOf(org, "bob"), "openai"),
    ]);
    expect(arrived).toBe(2);
    expect(fromA?.apiKey).toBe(fromB?.apiKey);
    expect((await auditOf(org)).filter((r) => r.action === "first_use")).toHaveLength(1);
  });

  it("a store racing a re-wrap and a first use keeps the new key, whose own first use is still audited", async () => {
    const [old, fresh] = [kek("old"), kek("new")];
    const org = newOrg();
    await storeOf([old]).put(callerOf(org), "openai", { apiKey: newKey(), baseUrl: null });
    const replacement = newKey();
    // A call reads the key sealed under the old vault key, then a new key is stored before it re-wraps and claims.
    const rotated = storeOf([fresh, old], {
      afterRead: async () => {
        await storeOf([fresh, old]).put(callerOf(org), "openai", { apiKey: replacement, baseUrl: null });
      },
    });
    await rotated.keyFor(callerOf(org), "openai");
    // Its re-wrap and its claim were of the revision it read: the new key's data key and first use are untouched.
    expect((await storeOf([fresh, old]).keyFor(callerOf(org), "openai"))?.apiKey).toBe(replacement);
    expect((await auditOf(org)).map((r) => r.action)).toEqual(["store", "store", "first_use"]);
  });

  describe("an organization's base_url", () => {
    let upstream: Server;
    let port: number;
    const seen: (string | undefined)[] = [];
    beforeAll(async () => {
      upstream = createServer((req, res) => {
        seen.push(req.headers.authorization);
        res.end("{}");
      });
      await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
      port = (upstream.address() as AddressInfo).port;
    });
    afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())));

    it("comes with the one dispatcher that may reach it: a name resolving to a private address is refused at connection", async () => {
      // Public when stored; the name resolves to loopback by the time of the call (DNS rebinding).
      const store = storeOf([kek("k1")], { resolver: async () => [{ address: "127.0.0.1", family: 4 }] });
      const org = newOrg();
      await store.put(callerOf(org), "openai", {
        apiKey: newKey(),
        baseUrl: `https://byok.example:${port}/v1`,
      });
      const found = await store.keyFor(callerOf(org), "openai");
      expect(found?.endpoint?.baseUrl).toBe(`https://byok.example:${port}/v1`);
      const refused = await request(`${found!.endpoint!.baseUrl}/chat/completions`, {
        method: "POST",
        dispatcher: found!.endpoint!.dispatcher,
        headers: { authorization: `Bearer ${found!.apiKey}` },
        body: "{}",
      }).catch((err: Error) => err);
      expect(refused).toBeInstanceOf(Error);
      expect(String((refused as Error).message)).toMatch(/loopback, private/);

      // An address literal is checked as it is connected to, too.
      await store.put(callerOf(org), "openai", { apiKey: newKey(), baseUrl: `https://127.0.0.1:${port}` });
      const literal = (await store.keyFor(callerOf(org), "openai"))!.endpoint!;
      await expect(
        request(`${literal.baseUrl}/chat/completions`, { method: "POST", dispatcher: literal.dispatcher }),
      ).rejects.toThrow(/loopback, private/);
      expect(seen).toEqual([]);
    });

    it("with BYOK_ALLOW_PRIVATE_BASE_URLS, a local provider gets the organization's key through it", async () => {
      const store = storeOf([kek("k1")], { allowPrivate: true });
      const org = newOrg();
      const key = newKey();
      await store.put(callerOf(org), "openai", { apiKey: key, baseUrl: `http://127.0.0.1:${port}/v1` });
      const found = (await store.keyFor(callerOf(org), "openai"))!;
      const answer = await request(`${found.endpoint!.baseUrl}/chat/completions`, {
        method: "POST",
        dispatcher: found.endpoint!.dispatcher,
        headers: { authorization: `Bearer ${found.apiKey}` },
        body: "{}",
      });
      await answer.body.text();
      expect(answer.statusCode).toBe(200);
      expect(seen).toEqual([`Bearer ${key}`]);
    });
  });
});

describe("the service's vault keys at start", () => {
  const before = process.env.NODE_ENV;
  afterEach(() => {
    process.env.NODE_ENV = before;
  });

  it("in production (NODE_ENV=production) the service refuses to start without VAULT_KEYS, naming it", async () => {
    process.env.NODE_ENV = "production";
    const dir = await mkdtemp(join(tmpdir(), "gw-service-vault-"));
    const config = serviceConfigSchema.parse({ PORT: "0", DATA_DIR: dir, REDIS_URL: "redis://127.0.0.1:9" });
    const refused = await startService(config, createLogger("test", "silent")).catch((e) => e);
    expect(refused).toBeInstanceOf(ConfigError);
    expect(refused.message).toMatch(/VAULT_KEYS: required in production/);
    await expect(readFile(join(dir, "vault-key"), "utf8")).rejects.toThrow();
  });
});
