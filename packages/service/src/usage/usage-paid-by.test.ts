import { randomBytes } from "node:crypto";
import { useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { UsageStore } from "./store.ts";

describe("usage paid with the organization's own provider key (group_by=paid_by)", () => {
  const test = useTestRedis();
  // USD per million tokens: a call of 1,000 input and 500 output tokens costs 0.002.
  const price = { input: 1, cachedInput: 0.5, output: 2 };
  const at = new Date("2026-03-01T12:00:00Z");
  const day = "2026-03-01";

  it("splits requests, tokens and cost between the platform's keys and the organization's own", async () => {
    const usage = new UsageStore(test.redis);
    const org = `org-${randomBytes(4).toString("hex")}`;
    const call = (user: string, ownKey?: boolean) =>
      usage.record({
        org,
        keyId: "key_1",
        user,
        model: "gpt",
        usage: { input_tokens: 1_000, output_tokens: 500, total_tokens: 1_500 },
        price,
        at,
        ...(ownKey === undefined ? {} : { ownKey }),
      });
    await call("alice", true);
    await call("alice", false);
    await call("alice");
    await call("bob", true);

    const row = (requests: number) => ({
      requests,
      input_tokens: 1_000 * requests,
      output_tokens: 500 * requests,
      total_tokens: 1_500 * requests,
      cost_usd: 0.002 * requests,
      cached_requests: 0,
    });
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
    const org = `org-${randomBytes(4).toString("hex")}`;
    await usage.record({
      org,
      keyId: "key_1",
      user: "alice",
      model: "gpt",
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
      price,
      at,
    });
    expect(
      (await usage.query(org, day, day, "paid_by")).data.map((r) => (r as { paid_by?: string }).paid_by),
    ).toEqual(["platform"]);
    expect((await usage.query(`${org}-none`, day, day, "paid_by")).data).toEqual([]);
  });
});
