import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Resolver } from "@gw/core/mcp";
import { flushTracing, startTracing, stopTracing } from "@gw/core/tracing";
import { scanKeys } from "@gw/test-kit";
import { type FakeAnthropic, startFakeAnthropic } from "@gw/test-kit/anthropic-upstream";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { utcDay } from "../src/usage/store.ts";
import { llmError, useStack } from "./stack.ts";

/**
 * Organizations' own provider keys in the routing of model calls, through
 * the whole stack. `gpt-4o` has a `byok` deployment on OWN (first) and the
 * platform's on PLATFORM (priority 1); `own-only` has nothing but a `byok`
 * deployment; `claude`, a `byok` Anthropic deployment. Each fake records the
 * credential header it got, so a test sees whose key reached it.
 */
const PLATFORM_KEY = "platform-key-0123456789abcdef";
const PRICE = { input: 1, cached_input: 0.5, output: 2 };
/** A name only the service's test resolver knows: a connection to it can only have gone through the key's own dispatcher. */
const OWN_GATEWAY = "own-gateway.test";

let own: FakeLLM;
let platform: FakeLLM;
let elsewhere: FakeLLM;
let anthropic: FakeAnthropic;
let dir: string;
const serviceEnv: Record<string, string> = {
  LLM_BASE_URL: "",
  LLM_API_KEY: "",
  LLM_DEFAULT_MODEL: "",
  LLM_RETRY_BACKOFF_MS: "0",
  // The organizations' base_urls in these tests are fakes on 127.0.0.1, over http.
  BYOK_ALLOW_PRIVATE_BASE_URLS: "true",
};
beforeAll(async () => {
  [own, platform, elsewhere, anthropic] = await Promise.all([
    startFakeLLM(),
    startFakeLLM(),
    startFakeLLM(),
    startFakeAnthropic(),
  ]);
  dir = await mkdtemp(join(tmpdir(), "gw-routing-byok-"));
  serviceEnv.MODELS_FILE = join(dir, "models.yaml");
  await writeFile(
    serviceEnv.MODELS_FILE,
    `models:
  - name: gpt-4o
    deployments:
      - {provider: openai, base_url: "${own.baseUrl}", model: gpt-4o-own, byok: true, price: ${JSON.stringify(PRICE)}}
      - {provider: openai, base_url: "${platform.baseUrl}", api_key: ${PLATFORM_KEY}, model: gpt-4o-platform, priority: 1, price: ${JSON.stringify(PRICE)}}
  - name: own-only
    deployments:
      - {provider: openai, base_url: "${own.baseUrl}", model: own-only, byok: true}
  - name: claude
    deployments:
      - {provider: anthropic, base_url: "${anthropic.baseUrl}", model: claude-own, byok: true}
`,
  );
});
const resolver: Resolver = async (host) =>
  host === OWN_GATEWAY ? [{ address: "127.0.0.1", family: 4 }] : Promise.reject(new Error("ENOTFOUND"));
const exporter = new InMemorySpanExporter();
await startTracing("routing-byok-test", {}, { exporter, simple: true });
afterAll(() => stopTracing());
const logLines: string[] = [];
const stack = useStack(serviceEnv, {}, logLines, "single", { resolver });
afterAll(async () => {
  await Promise.all([own.close(), platform.close(), elsewhere.close(), anthropic.close()]);
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  for (const fake of [own, platform, elsewhere]) {
    fake.mode = "ok";
    fake.failBody = undefined;
  }
  for (const key of await scanKeys(stack.redis, "gw:llm:cooldown:*")) await stack.redis.del(key);
});

/** Every key a test stored: none may show in an answer, a log line, a span or the audit trail. */
const stored: string[] = [];
const newKey = () => {
  const key = `sk-own-${randomBytes(20).toString("hex")}`;
  stored.push(key);
  return key;
};
/** An organization with an administrator (to store keys) and a key that calls models. */
async function organization() {
  const org = `org-${randomBytes(5).toString("hex")}`;
  const [admin, caller] = await Promise.all([
    stack.createKey({ org, permissions: ["admin:api-keys"] }),
    stack.createKey({ org }),
  ]);
  const store = async (provider: string, body: Record<string, unknown>) => {
    const res = await stack.call(admin.secret, `/api/v1/providers/credentials/${provider}`, {
      method: "PUT",
      json: body,
    });
    expect(res.status).toBe(200);
  };
  return { org, admin, caller, store };
}
const ask = (secret: string, model = "gpt-4o") =>
  stack.call(secret, "/api/v1/llm/chat/completions", {
    json: { model, messages: [{ role: "user", content: "whose key" }] },
    user: "alice",
  });

describe("a byok deployment", () => {
  it("sends each organization's own key, and only for its own calls; an organization without one is served by the platform's deployment", async () => {
    const [x, y, z] = await Promise.all([organization(), organization(), organization()]);
    const [keyX, keyZ] = [newKey(), newKey()];
    await x.store("openai", { api_key: keyX });
    await z.store("openai", { api_key: keyZ });

    const reached = async (secret: string) => {
      const before = { own: own.requests.length, platform: platform.requests.length };
      const res = await ask(secret);
      expect(res.status).toBe(200);
      return {
        own: own.requests.slice(before.own).map((r) => r.authorization),
        platform: platform.requests.slice(before.platform).map((r) => r.authorization),
        model: (await res.json()).model,
      };
    };
    expect(await reached(x.caller.secret)).toEqual({
      own: [`Bearer ${keyX}`],
      platform: [],
      model: "gpt-4o-own-2026-01-01",
    });
    expect(await reached(y.caller.secret)).toEqual({
      own: [],
      platform: [`Bearer ${PLATFORM_KEY}`],
      model: "gpt-4o-platform-2026-01-01",
    });
    expect(await reached(z.caller.secret)).toEqual({
      own: [`Bearer ${keyZ}`],
      platform: [],
      model: "gpt-4o-own-2026-01-01",
    });
    // A deleted key is no longer used, from the next call on.
    const deleted = await stack.call(x.admin.secret, "/api/v1/providers/credentials/openai", {
      method: "DELETE",
    });
    expect(deleted.status).toBe(204);
    expect((await reached(x.caller.secret)).platform).toEqual([`Bearer ${PLATFORM_KEY}`]);
  });

  it("is skipped for an organization without a key: a name with nothing else answers 503, no deployment can take the call", async () => {
    const { caller } = await organization();
    const before = own.requests.length;
    const res = await ask(caller.secret, "own-only");
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual(
      llmError("service_unavailable", "No deployment of the model 'own-only' can take calls now"),
    );
    expect(own.requests.length).toBe(before);
  });

  it("sends an Anthropic key as x-api-key to an Anthropic byok deployment", async () => {
    const { caller, store } = await organization();
    const key = newKey();
    await store("anthropic", { api_key: key });
    const res = await ask(caller.secret, "claude");
    expect(res.status).toBe(200);
    expect(anthropic.requests.at(-1)?.headers["x-api-key"]).toBe(key);
  });

  it("goes to the base_url the organization stored with its key, through the connections its key's dispatcher checks", async () => {
    const { caller, store } = await organization();
    const key = newKey();
    // The host is known only to the service's resolver for organizations' base_urls: no other connection could reach it.
    await store("openai", { api_key: key, base_url: elsewhere.baseUrl.replace("127.0.0.1", OWN_GATEWAY) });
    const before = own.requests.length;
    const res = await ask(caller.secret);
    expect(res.status).toBe(200);
    expect(elsewhere.requests.at(-1)).toMatchObject({ authorization: `Bearer ${key}` });
    expect(elsewhere.requests.at(-1)!.body.model).toBe("gpt-4o-own");
    expect(own.requests.length).toBe(before);
  });

  it("marks its calls as paid with the organization's own key in usage", async () => {
    const { admin, caller, store } = await organization();
    await store("openai", { api_key: newKey() });
    expect((await ask(caller.secret)).status).toBe(200);
    expect((await ask(caller.secret)).status).toBe(200);
    await stack.call(admin.secret, "/api/v1/providers/credentials/openai", { method: "DELETE" });
    expect((await ask(caller.secret)).status).toBe(200);
    const today = utcDay(new Date());
    const usage = await (
      await stack.call(caller.secret, `/api/v1/usage?start=${today}&group_by=paid_by`)
    ).json();
    expect(usage.data.map((r: { paid_by: string; requests: number }) => [r.paid_by, r.requests])).toEqual([
      ["platform", 1],
      ["organization", 2],
    ]);
  });

  it("audits the first use after each store once, with the call's request id, and shows when it was first used", async () => {
    const { admin, caller, store } = await organization();
    await store("openai", { api_key: newKey() });
    const first = await ask(caller.secret);
    expect(first.status).toBe(200);
    expect((await ask(caller.secret)).status).toBe(200);
    const trail = await (
      await stack.call(admin.secret, "/api/v1/admin/audit?resourceType=provider_key")
    ).json();
    expect(
      trail.data.map((r: { action: string; requestId: string; actor: { keyId: string } }) => [
        r.action,
        r.action === "first_use" ? r.requestId : "",
        r.actor.keyId,
      ]),
    ).toEqual([
      ["first_use", first.headers.get("x-request-id"), caller.id],
      ["store", "", admin.id],
    ]);
    const [listed] = (await (await stack.call(admin.secret, "/api/v1/providers/credentials")).json()).data;
    expect(listed.first_used_at).toEqual(expect.any(Number));
  });

  it("keeps the organization's key out of the answer, the log, every span and the audit trail, even when its provider echoes it", async () => {
    const { caller, store } = await organization();
    const key = newKey();
    await store("openai", { api_key: key });
    own.mode = "fail";
    own.failBody = JSON.stringify({ error: { message: `invalid key ${key}` } });
    const res = await ask(caller.secret, "own-only");
    expect(res.status).toBe(502);
    const answer = await res.text();
    expect(answer).not.toContain(key);
    expect(JSON.stringify(stack.serviceLogs)).toContain("invalid key [redacted]");

    await flushTracing();
    const spans = JSON.stringify(exporter.getFinishedSpans().map((s) => [s.name, s.attributes, s.events]));
    expect(spans).toContain("own-only#0");
    const { rows } = await stack.db.query<{ record: string }>(
      "SELECT record::text AS record FROM audit_records",
    );
    const logs = logLines.join("\n");
    expect(logs).toContain("own-only");
    for (const typed of stored) {
      expect(logs).not.toContain(typed);
      expect(spans).not.toContain(typed);
      for (const { record } of rows) expect(record).not.toContain(typed);
    }
  });
});
