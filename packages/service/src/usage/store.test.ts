import { randomBytes } from "node:crypto";
import { usageDayKey, usageField, usagePair } from "@gw/core/usage-days";
import { useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { type UsageEvent, UsageStore } from "./store.ts";

const test = useTestRedis();
// USD per million tokens: a call of 1,000 input and 500 output tokens costs 0.002.
const price = { input: 1, cachedInput: 0.5, output: 2 };
const at = new Date("2026-03-01T12:00:00Z");
const day = "2026-03-01";
const freshOrg = () => `org-${randomBytes(4).toString("hex")}`;
/** A call of `user`'s through `key_1` to model `gpt`: 1,000 input and 500 output tokens at `price`. */
const callOf = (org: string, user: string, more: Partial<UsageEvent> = {}): UsageEvent => ({
  org,
  keyId: "key_1",
  user,
  model: "gpt",
  usage: { input_tokens: 1_000, output_tokens: 500, total_tokens: 1_500 },
  price,
  at,
  ...more,
});
/** What a report shows for `requests` calls of 1,000 input and 500 output tokens at `price`. */
const row = (requests: number) => ({
  requests,
  input_tokens: 1_000 * requests,
  output_tokens: 500 * requests,
  total_tokens: 1_500 * requests,
  cost_usd: 0.002 * requests,
  cached_requests: 0,
});

describe("a day's usage in Redis", () => {
  const served = { provider: "openai", model: "gpt-4o" };
  const call = (org: string, user: string, ownKey = false) =>
    callOf(org, user, { deployment: served, ownKey });

  it("a call writes only the breakdowns the others add up from: 3, and 4 paid with the organization's key", async () => {
    const usage = new UsageStore(test.redis);
    const org = freshOrg();
    await usage.record(call(org, "alice"));
    const breakdowns = async () =>
      [
        ...new Set(Object.keys(await test.redis.hgetall(usageDayKey(org, day))).map((f) => f.split("|")[0])),
      ].sort();
    expect(await breakdowns()).toEqual(["key_model_deployment", "~user_key", "~user_model_deployment"]);
    await usage.record(call(org, "alice", true));
    expect(await breakdowns()).toEqual([
      "key_model_deployment",
      "~user_key",
      "~user_model_deployment",
      "~user_paid_by",
    ]);
  });

  it("a report adds the calls of a day written before this layout (every breakdown whole) to those written since", async () => {
    const usage = new UsageStore(test.redis);
    const org = freshOrg();
    // One call of bob's as the code before wrote it: every breakdown, each metric not zero.
    const before: [string, string[]][] = [
      ["total", [""]],
      ["model", ["gpt"]],
      ["user", ["bob"]],
      ["key", ["key_1"]],
      ["user_model", ["bob", "gpt"]],
      ["user_key", ["bob", "key_1"]],
      ["paid_by", ["organization"]],
      ["user_paid_by", ["bob", "organization"]],
      ["model_deployment", ["gpt", "openai", "gpt-4o"]],
      ["user_model_deployment", ["bob", "gpt", "openai", "gpt-4o"]],
      ["key_model_deployment", ["key_1", "gpt", "openai", "gpt-4o"]],
    ];
    const amounts = {
      requests: 1,
      input_tokens: 1_000,
      output_tokens: 500,
      total_tokens: 1_500,
      cost_nusd: 2_000_000,
    };
    for (const [dimension, parts] of before)
      for (const [metric, amount] of Object.entries(amounts))
        await test.redis.hincrby(
          usageDayKey(org, day),
          usageField(dimension, usagePair(...parts), metric),
          amount,
        );
    // And two of alice's since, one paid with the organization's key.
    await usage.record(call(org, "alice"));
    await usage.record(call(org, "alice", true));

    const byModel = await usage.query(org, day, day, "model");
    expect(byModel).toEqual({
      totals: row(3),
      data: [{ model: "gpt", ...row(3), deployments: [{ ...served, ...row(3) }] }],
    });
    expect((await usage.query(org, day, day, "end_user")).data).toEqual([
      { end_user: "alice", ...row(2) },
      { end_user: "bob", ...row(1) },
    ]);
    expect((await usage.query(org, day, day, "key")).data).toEqual([{ key_id: "key_1", ...row(3) }]);
    expect((await usage.query(org, day, day, "paid_by")).data).toEqual([
      { paid_by: "platform", ...row(1) },
      { paid_by: "organization", ...row(2) },
    ]);
    // Each end user's own view, from its own fields of both layouts.
    expect(await usage.query(org, day, day, "model", "bob")).toEqual({
      totals: row(1),
      data: [{ model: "gpt", ...row(1), deployments: [{ ...served, ...row(1) }] }],
    });
    expect((await usage.query(org, day, day, "key", "alice")).data).toEqual([{ key_id: "key_1", ...row(2) }]);
  });
});

describe("usage paid with the organization's own provider key (group_by=paid_by)", () => {
  it("splits requests, tokens and cost between the platform's keys and the organization's own", async () => {
    const usage = new UsageStore(test.redis);
    const org = freshOrg();
    const call = (user: string, ownKey?: boolean) =>
      usage.record(callOf(org, user, ownKey === undefined ? {} : { ownKey }));
    await call("alice", true);
    await call("alice", false);
    await call("alice");
    await call("bob", true);

    const all = await usage.query(org, day, day, "paid_by");
    expect(all.totals).toEqual(row(4));
    expect(all.data).toEqual([
      { paid_by: "platform", ...row(2) },
      { paid_by: "organization", ...row(2) },
    ]);
    // An end user's own view: its calls only.
    expect((await usage.query(org, day, day, "paid_by", "bob")).data).toEqual([
      { paid_by: "organization", ...row(1) },
    ]);
    expect((await usage.query(org, day, day, "paid_by", "alice")).data).toEqual([
      { paid_by: "platform", ...row(2) },
      { paid_by: "organization", ...row(1) },
    ]);
    // The other groupings are as they were.
    expect((await usage.query(org, day, day, "model")).data).toEqual([
      { model: "gpt", ...row(4), deployments: [] },
    ]);
  });

  it("an organization whose calls all went through the platform's keys has one row", async () => {
    const usage = new UsageStore(test.redis);
    const org = freshOrg();
    await usage.record(callOf(org, "alice"));
    expect(
      (await usage.query(org, day, day, "paid_by")).data.map((r) => (r as { paid_by?: string }).paid_by),
    ).toEqual(["platform"]);
    expect((await usage.query(`${org}-none`, day, day, "paid_by")).data).toEqual([]);
  });
});
