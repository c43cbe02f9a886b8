import { randomBytes } from "node:crypto";
import type { KeyCacheMode } from "@gw/core/principal";
import { keyUsageByDeployment } from "@gw/core/usage-days";
import { describe, expect, it } from "vitest";
import { parseEvents, useStack } from "../../test/stack.ts";

/*
 * The response cache across the whole path (gateway, service, Redis, SpiceDB,
 * PostgreSQL, a fake provider that counts its calls): what is answered from
 * it, for whom, and what never crosses a principal or an organization.
 */
// Small enough that a long answer goes past it.
const stack = useStack({ RESPONSE_CACHE_MAX_BYTES: "20000" });
const RESPONSES = "/api/v1/llm/responses";
const CHAT = "/api/v1/llm/chat/completions";

/** A prompt no other test sends. */
const prompt = () => `tell me about ${randomBytes(6).toString("hex")}`;

async function cachedKey(cache: KeyCacheMode, org?: string) {
  return stack.createKey({ cache, ...(org ? { org } : {}) });
}

/** A response call; returns its status, `X-Gateway-Cache`, body and how many times the provider was called for it. */
async function ask(
  secret: string,
  json: Record<string, unknown>,
  options: { user?: string; headers?: Record<string, string>; path?: string } = {},
) {
  const before = stack.llm.requests.length;
  const res = await stack.call(secret, options.path ?? RESPONSES, {
    json,
    ...(options.user ? { user: options.user } : {}),
    ...(options.headers ? { headers: options.headers } : {}),
  });
  const text = await res.text();
  const body = res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : text;
  return {
    status: res.status,
    cache: res.headers.get("x-gateway-cache"),
    body,
    providerCalls: stack.llm.requests.length - before,
  };
}

const textOf = (response: { output: { type: string; content?: { text: string }[] }[] }) =>
  response.output.find((o) => o.type === "message")?.content?.[0]?.text;

describe("the response cache: who shares an answer", () => {
  it("with cache principal, a second end user of the same key gets a fresh answer; the same one a hit", async () => {
    const key = await cachedKey("principal");
    const input = prompt();
    const first = await ask(key.secret, { input }, { user: "alice" });
    expect(first).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
    const again = await ask(key.secret, { input }, { user: "alice" });
    expect(again).toMatchObject({ status: 200, cache: "hit", providerCalls: 0 });
    expect(textOf(again.body)).toBe(textOf(first.body));
    expect(again.body.id).not.toBe(first.body.id);
    const bob = await ask(key.secret, { input }, { user: "bob" });
    expect(bob).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
  });

  it("with cache key, end users share answers of requests that read nothing stored, never of those that do", async () => {
    const key = await cachedKey("key");
    const input = prompt();
    expect(await ask(key.secret, { input }, { user: "alice" })).toMatchObject({
      cache: "miss",
      providerCalls: 1,
    });
    expect(await ask(key.secret, { input }, { user: "bob" })).toMatchObject({
      cache: "hit",
      providerCalls: 0,
    });

    // A response both may read: a chain from it reads stored content, kept to each principal.
    const shared = await ask(key.secret, { input: prompt() }, { user: "alice" });
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: shared.body.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const chain = { input: "and then?", previous_response_id: shared.body.id };
    expect(await ask(key.secret, chain, { user: "alice" })).toMatchObject({
      cache: "miss",
      providerCalls: 1,
    });
    expect(await ask(key.secret, chain, { user: "alice" })).toMatchObject({ cache: "hit", providerCalls: 0 });
    expect(await ask(key.secret, chain, { user: "bob" })).toMatchObject({ cache: "miss", providerCalls: 1 });
  });

  it("a grantee reading a shared response through previous_response_id gets a fresh answer after a revoke", async () => {
    const key = await cachedKey("principal");
    const owned = await ask(key.secret, { input: prompt() }, { user: "alice" });
    const role = (action: "grant" | "revoke") =>
      stack.call(key.secret, `/api/v1/authorization/llm/${action}`, {
        json: { resourceType: "response", resourceId: owned.body.id, userId: "bob", role: "reader" },
        user: "alice",
      });
    expect((await role("grant")).status).toBe(204);
    const chain = { input: "summarise it", previous_response_id: owned.body.id };
    expect(await ask(key.secret, chain, { user: "bob" })).toMatchObject({ cache: "miss", providerCalls: 1 });
    expect(await ask(key.secret, chain, { user: "bob" })).toMatchObject({ cache: "hit", providerCalls: 0 });

    expect((await role("revoke")).status).toBe(204);
    const refused = await ask(key.secret, chain, { user: "bob" });
    expect(refused).toMatchObject({ status: 404, providerCalls: 0 });
    expect(JSON.stringify(refused.body)).not.toContain("summarise");

    // Granted again: what was kept under the old grant is not served; the model answers afresh.
    expect((await role("grant")).status).toBe(204);
    expect(await ask(key.secret, chain, { user: "bob" })).toMatchObject({
      status: 200,
      cache: "miss",
      providerCalls: 1,
    });
  });

  it("keeps an answer that read a response without a token in Redis for less than a token lives", async () => {
    const key = await cachedKey("principal");
    const owned = await ask(key.secret, { input: prompt() }, { user: "alice" });
    const entries = async () =>
      (await stack.redis.keys(`gw:rcache:{${key.org}}:*`)).filter((name) => !name.includes("#"));
    const lifeOfNewEntry = async (json: Record<string, unknown>) => {
      const before = new Set(await entries());
      expect(await ask(key.secret, json, { user: "alice" })).toMatchObject({ cache: "miss" });
      const added = (await entries()).filter((name) => !before.has(name));
      expect(added).toHaveLength(1);
      return stack.redis.pttl(added[0]!);
    };
    // While the response's token is in Redis: the whole RESPONSE_CACHE_TTL (an hour).
    const hot = await lifeOfNewEntry({ input: "summarise it", previous_response_id: owned.body.id });
    expect(hot).toBeGreaterThan(3_600_000 - 60_000);
    // Once its token has left Redis: less than a token lives (SPICEDB_ZEDTOKEN_TTL, an hour, less a minute), so a
    // grant or revoke written later, whose token has also left by then, never meets this entry again.
    await stack.redis.del(`gw:zedtoken:{response:${key.org}/${owned.body.id}}`);
    const cold = await lifeOfNewEntry({ input: "summarise it again", previous_response_id: owned.body.id });
    expect(cold).toBeGreaterThan(0);
    expect(cold).toBeLessThanOrEqual(3_600_000 - 60_000);
  });

  it("two organizations sending the same prompt as the same user never share an answer", async () => {
    const input = prompt();
    for (const cache of ["key", "principal"] as const) {
      const [one, two] = [await cachedKey(cache), await cachedKey(cache)];
      expect(one.org).not.toBe(two.org);
      expect(await ask(one.secret, { input: `${input} ${cache}` })).toMatchObject({ cache: "miss" });
      expect(await ask(one.secret, { input: `${input} ${cache}` })).toMatchObject({ cache: "hit" });
      expect(await ask(two.secret, { input: `${input} ${cache}` })).toMatchObject({
        cache: "miss",
        providerCalls: 1,
      });
    }
  });

  it("a caller can neither choose another's entry nor probe for it", async () => {
    const key = await cachedKey("principal");
    const input = prompt();
    await ask(key.secret, { input, user: "u1", metadata: { a: "1" } }, { user: "alice" });
    // Fields that do not change the answer do not change the entry: the caller cannot steer it with them.
    expect(
      await ask(
        key.secret,
        { input, user: "u2", metadata: { b: "2" }, prompt_cache_key: "mine", safety_identifier: "x" },
        { user: "alice" },
      ),
    ).toMatchObject({ cache: "hit" });
    // Entries are named by an HMAC: neither the prompt nor who asked appears in Redis's key names.
    // (Beside them, each organization's bookkeeping of its entries' sizes: `#index`, `#sizes`, `#bytes`.)
    const all = await stack.redis.keys("gw:rcache:*");
    for (const name of all.filter((n) => n.includes("#")))
      expect(name).toMatch(/^gw:rcache:\{[^}]+\}#(index|sizes|bytes)$/);
    const names = all.filter((n) => !n.includes("#"));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      expect(name).toMatch(/^gw:rcache:\{[^}]+\}:[A-Za-z0-9_-]{43}$/);
      expect(name).not.toContain("alice");
      expect(name).not.toContain(input.split(" ").at(-1)!);
    }
    // Another end user sending the fields a naive key would be spelled from, or the entry's very name, gets a miss.
    const own = names.find((n) => n.includes(`{${key.org}}`))!;
    for (const [user, extra] of [
      ["bob", { prompt_cache_key: own, safety_identifier: "alice", user: "alice" }],
      ['alice"', {}],
      ["Alice", {}],
      [`alice","key":"${key.id}`, {}],
    ] as const) {
      const probe = await ask(key.secret, { input, ...extra }, { user });
      if (probe.status === 422) continue; // not an acceptable end-user id at all
      expect(probe, user).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
    }
    // And no header names an entry: `X-Gateway-Cache` takes only off or refresh.
    const chosen = await ask(key.secret, { input }, { user: "bob", headers: { "x-gateway-cache": own } });
    expect(chosen.status).toBe(422);
    expect(chosen.body.detail[0].loc).toEqual(["header", "x-gateway-cache"]);
    expect(chosen.providerCalls).toBe(0);
  });
});

describe("the response cache: X-Gateway-Cache", () => {
  it("is bypass on every answer of a key whose cache is off, and of a model route that never caches", async () => {
    const key = await cachedKey("off");
    const input = prompt();
    for (let i = 0; i < 2; i++)
      expect(await ask(key.secret, { input })).toMatchObject({ cache: "bypass", providerCalls: 1 });
    const chat = await ask(
      key.secret,
      { model: "echo-small", messages: [{ role: "user", content: input }] },
      {
        path: CHAT,
      },
    );
    expect(chat).toMatchObject({ status: 200, cache: "bypass" });
    const plain = await stack.createKey();
    expect(await ask(plain.secret, { input })).toMatchObject({ cache: "bypass", providerCalls: 1 });
    // The gateway's own refusals of a model route say so too (401 here); a route that calls no model says nothing.
    const anonymous = await fetch(`${stack.gatewayUrl}${RESPONSES}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input }),
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-gateway-cache")).toBe("bypass");
    const read = await stack.call(key.secret, `${RESPONSES}/resp_none`, { method: "GET" });
    expect(read.headers.get("x-gateway-cache")).toBeNull();
    // A request refused by its schema is an answer of the route too.
    const cached = await cachedKey("principal");
    for (const [path, json] of [
      [CHAT, { model: "echo-small", messages: [{ role: "user", content: input }], temperature: 9 }],
      [RESPONSES, { input, n: 2 }],
      [RESPONSES, { input, unknown_field: true }],
    ] as const) {
      expect(await ask(cached.secret, json, { path }), JSON.stringify(json)).toMatchObject({
        status: 422,
        cache: "bypass",
        providerCalls: 0,
      });
    }
  });

  it("off bypasses the cache; refresh asks the model again and keeps its answer; others are 422", async () => {
    const key = await cachedKey("principal");
    const input = prompt();
    const chat = { model: "echo-small", messages: [{ role: "user", content: input }] };
    const on = (value?: string) => ({
      path: CHAT,
      ...(value ? { headers: { "X-Gateway-Cache": value } } : {}),
    });
    expect(await ask(key.secret, chat, on())).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
    expect(await ask(key.secret, chat, on())).toMatchObject({ status: 200, cache: "hit", providerCalls: 0 });
    expect(await ask(key.secret, chat, on("off"))).toMatchObject({ cache: "bypass", providerCalls: 1 });
    expect(await ask(key.secret, chat, on("OFF"))).toMatchObject({ cache: "bypass", providerCalls: 1 });

    stack.llm.answerWith = () => "a newer answer";
    try {
      const refreshed = await ask(key.secret, chat, on("refresh"));
      expect(refreshed).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
      expect(refreshed.body.choices[0].message.content).toBe("a newer answer");
    } finally {
      stack.llm.answerWith = undefined;
    }
    const after = await ask(key.secret, chat, on());
    expect(after).toMatchObject({ cache: "hit", providerCalls: 0 });
    expect(after.body.choices[0].message.content).toBe("a newer answer");

    for (const bad of ["on", "hit", "refresh, off"]) {
      const refused = await ask(key.secret, chat, on(bad));
      expect(refused.status, bad).toBe(422);
      expect(refused.body.detail[0].loc).toEqual(["header", "x-gateway-cache"]);
    }
    // A value in UTF-8 (sent as its bytes) is echoed as it was written; a long one not at all.
    const accented = await ask(key.secret, chat, on(Buffer.from("désactivé", "utf8").toString("latin1")));
    expect(accented.body.detail).toEqual([expect.objectContaining({ type: "enum", input: "désactivé" })]);
    const long = await ask(key.secret, chat, on("x".repeat(5000)));
    expect(long.status).toBe(422);
    expect(long.body.detail[0]).not.toHaveProperty("input");
  });
});

describe("the response cache: streams, stored answers and usage", () => {
  it("replays a stream as the same stream, with new ids, and a stored response of the caller's own", async () => {
    const key = await cachedKey("principal");
    const input = prompt();
    const first = await ask(key.secret, { input, stream: true });
    expect(first).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
    const replay = await ask(key.secret, { input, stream: true });
    expect(replay).toMatchObject({ status: 200, cache: "hit", providerCalls: 0 });
    const [a, b] = [parseEvents(first.body), parseEvents(replay.body)];
    expect(b.map((e) => e.type)).toEqual(a.map((e) => e.type));
    const deltas = (events: typeof a) =>
      events.filter((e) => e.type === "response.output_text.delta").map((e) => e.data.delta);
    expect(deltas(b)).toEqual(deltas(a));
    expect(deltas(b).length).toBeGreaterThan(1);
    const done = (events: typeof a) => events.find((e) => e.type === "response.completed")!.data.response;
    expect(done(b).id).not.toBe(done(a).id);
    expect(done(b).output[0].id).not.toBe(done(a).output[0].id);
    // The hit made a response of its own, stored and owned by the caller.
    const stored = await stack.call(key.secret, `${RESPONSES}/${done(b).id}`);
    expect(stored.status).toBe(200);
    expect(textOf(await stored.json())).toBe(textOf(done(a)));

    // A chat completion's stream too; and an answer first kept from a JSON call replays as a stream.
    const chat = { model: "echo-small", messages: [{ role: "user", content: prompt() }] };
    expect(await ask(key.secret, chat, { path: CHAT })).toMatchObject({ cache: "miss" });
    const streamed = await ask(key.secret, { ...chat, stream: true }, { path: CHAT });
    expect(streamed).toMatchObject({ status: 200, cache: "hit", providerCalls: 0 });
    const chunks = (streamed.body as string)
      .split("\n\n")
      .filter((b) => b.startsWith("data: {"))
      .map((b) => JSON.parse(b.slice(6)));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toContain(
      chat.messages[0]!.content,
    );
  });

  it("charges a hit no provider tokens and counts it as cached in usage; a hit still counts as a request", async () => {
    const key = await cachedKey("principal");
    const input = prompt();
    const miss = await ask(key.secret, { input });
    const hit = await ask(key.secret, { input });
    expect([miss.cache, hit.cache]).toEqual(["miss", "hit"]);
    const today = new Date().toISOString().slice(0, 10);
    const usage = await (await stack.call(key.secret, `/api/v1/usage?start=${today}&group_by=key`)).json();
    expect(usage.totals).toMatchObject({
      requests: 2,
      cached_requests: 1,
      input_tokens: miss.body.usage.input_tokens,
      output_tokens: miss.body.usage.output_tokens,
    });
    expect(usage.totals.input_tokens).toBeGreaterThan(0);
    // By model, the deployments add up to the model: the hit is the cache's row.
    const byModel = await (
      await stack.call(key.secret, `/api/v1/usage?start=${today}&group_by=model`)
    ).json();
    const [row] = byModel.data;
    expect(row).toMatchObject({ requests: 2, cached_requests: 1 });
    expect(row.deployments).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ provider: "cache", requests: 1, cached_requests: 1 }),
      ]),
    );
    const sum = (metric: string) =>
      row.deployments.reduce((n: number, d: Record<string, number>) => n + d[metric]!, 0);
    expect([sum("requests"), sum("cached_requests")]).toEqual([2, 1]);
    // And so does pnpm keys usage's `served`, read from the same day hashes.
    const [served] = await keyUsageByDeployment(stack.redis, key.org, key.id, today, today);
    expect(served).toMatchObject({ requests: 2, cached_requests: 1 });
  });

  it("counts a hit in the key's request windows like any request", async () => {
    const key = await stack.createKey({ cache: "principal", limits: { minute: 2 } });
    const input = prompt();
    expect(await ask(key.secret, { input })).toMatchObject({ status: 200, cache: "miss" });
    expect(await ask(key.secret, { input })).toMatchObject({ status: 200, cache: "hit" });
    expect(await ask(key.secret, { input })).toMatchObject({ status: 429, providerCalls: 0 });
  });

  it("keeps an organization's entries within RESPONSE_CACHE_MAX_BYTES: the oldest go first, and another organization keeps its own", async () => {
    const key = await cachedKey("principal", "org-budget");
    const other = await cachedKey("principal", "org-budget-other");
    // Each answer (the fake model says the prompt back) is a third of the budget and more.
    const long = (n: number) => `${prompt()} ${`word${n} `.repeat(1_100)}`;
    const inputs = [long(1), long(2), long(3)];
    const kept = await ask(other.secret, { input: inputs[0] });
    expect(kept.cache).toBe("miss");
    for (const input of inputs) expect((await ask(key.secret, { input })).cache).toBe("miss");
    // The third did not fit beside the first two: the first went.
    expect(await ask(key.secret, { input: inputs[2] })).toMatchObject({ cache: "hit", providerCalls: 0 });
    expect(await ask(key.secret, { input: inputs[1] })).toMatchObject({ cache: "hit", providerCalls: 0 });
    expect(await ask(key.secret, { input: inputs[0] })).toMatchObject({ cache: "miss", providerCalls: 1 });
    // The other organization's entry was not pushed out by this one's.
    expect(await ask(other.secret, { input: inputs[0] })).toMatchObject({ cache: "hit", providerCalls: 0 });
    // What Redis holds for the organization: its entries' bytes, as counted, within the budget.
    const names = (await stack.redis.keys("gw:rcache:{org-budget}:*")).filter((n) => !n.includes("#"));
    const lengths = await Promise.all(names.map((n) => stack.redis.strlen(n)));
    const total = lengths.reduce((a, b) => a + b, 0);
    expect(names).toHaveLength(2);
    expect(Number(await stack.redis.get("gw:rcache:{org-budget}#bytes"))).toBe(total);
    expect(total).toBeLessThanOrEqual(20_000);
  });

  it("keeps no answer larger than RESPONSE_CACHE_MAX_BYTES (here smaller than RESPONSE_CACHE_MAX_ENTRY_BYTES)", async () => {
    const key = await cachedKey("principal");
    const input = `${prompt()} ${"word ".repeat(5_000)}`;
    expect(await ask(key.secret, { input })).toMatchObject({ status: 200, cache: "miss" });
    expect(await ask(key.secret, { input })).toMatchObject({ status: 200, cache: "miss", providerCalls: 1 });
  });
});
