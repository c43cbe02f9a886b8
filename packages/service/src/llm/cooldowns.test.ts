import { randomBytes } from "node:crypto";
import { createRedis } from "@gw/core/redis";
import { describeEachTopology, scanKeys, useTestRedis } from "@gw/test-kit";
import { expect, it } from "vitest";
import type { CatalogueModel, Deployment } from "./catalogue.ts";
import { RedisCooldowns } from "./cooldowns.ts";

const POLICY = { failures: 3, windowMs: 60_000, coolMs: 30_000 };

/** A model of its own (fresh name: keys no other test shares) with two deployments. */
function freshModel(): CatalogueModel {
  const name = `m-${randomBytes(4).toString("hex")}`;
  const deployments = [0, 1].map(
    (index): Deployment => ({
      id: `${name}#${index}`,
      modelName: name,
      index,
      provider: "openai",
      baseUrl: "http://x.invalid",
      apiKey: undefined,
      upstreamModel: "x",
      weight: 1,
      priority: index,
      timeoutMs: 1_000,
      price: undefined,
      apiVersion: undefined,
      byok: false,
    }),
  );
  return { name, fallbacks: [], deployments, canCool: true };
}

describeEachTopology("shared cooldowns on %s Redis", (topology) => {
  const redis = useTestRedis(topology);

  it("cools a deployment once its failures reach the count within the window, and only that one", async () => {
    const cooldowns = new RedisCooldowns(redis.redis);
    const model = freshModel();
    const [first] = model.deployments;
    expect(await cooldowns.failed(first!, POLICY)).toBe(false);
    expect(await cooldowns.failed(first!, POLICY)).toBe(false);
    expect((await cooldowns.states(model)).map((s) => s.kind)).toEqual(["ready", "ready"]);
    expect(await cooldowns.failed(first!, POLICY)).toBe(true);
    const [cooling, other] = await cooldowns.states(model);
    expect(cooling).toMatchObject({ kind: "cooling" });
    expect(cooling!.kind === "cooling" && cooling!.remainingMs).toBeGreaterThan(29_000);
    expect(other).toEqual({ kind: "ready" });
    // Failures seen while it cools start nothing more: one cooldown, counted once.
    expect(await cooldowns.failed(first!, POLICY)).toBe(false);
  });

  it("starts one cooldown when two replicas count the last failure at once", async () => {
    const second = createRedis(redis.server.url, { connectionName: "second-replica" });
    try {
      const [a, b] = [new RedisCooldowns(redis.redis), new RedisCooldowns(second)];
      const model = freshModel();
      const d = model.deployments[0]!;
      await a.failed(d, POLICY);
      const started = await Promise.all([a.failed(d, POLICY), b.failed(d, POLICY), a.failed(d, POLICY)]);
      expect(started.filter(Boolean)).toHaveLength(1);
    } finally {
      second.disconnect();
    }
  });

  it("after its cooldown, lets one probe through, and takes traffic back once the probe answers", async () => {
    const cooldowns = new RedisCooldowns(redis.redis);
    const model = freshModel();
    const d = model.deployments[0]!;
    expect(await cooldowns.failed(d, POLICY, 5_000)).toBe(true); // at once: a Retry-After
    // The cooldown ends when its key expires in Redis; the test ends it by deleting the key.
    const [coolKey] = await scanKeys(redis.redis, `gw:llm:cooldown:{${model.name}}:0:cool`);
    expect(coolKey).toBeDefined();
    await redis.redis.del(coolKey!);
    expect((await cooldowns.states(model))[0]).toEqual({ kind: "probation" });
    // The router's clock has fractions of a millisecond: a claim's lifetime may too, and still claims once.
    expect(await cooldowns.claimProbe(d, 10_000.37)).toBe(true);
    expect(await cooldowns.claimProbe(d, 10_000.37)).toBe(false);
    await cooldowns.recovered(d);
    expect((await cooldowns.states(model))[0]).toEqual({ kind: "ready" });
    // Its failures before were forgotten: one more does not cool it down.
    expect(await cooldowns.failed(d, { ...POLICY, failures: 2 })).toBe(false);
  });

  it("keeps a byok deployment's state per organization: one organization's failures never cool it for another", async () => {
    const cooldowns = new RedisCooldowns(redis.redis);
    const model = freshModel();
    const byok = { ...model.deployments[0]!, byok: true };
    const byokModel = { ...model, deployments: [byok, model.deployments[1]!] };
    expect(await cooldowns.failed(byok, POLICY, 30_000, "acme")).toBe(true); // acme's key: a Retry-After
    expect((await cooldowns.states(byokModel, "acme")).map((s) => s.kind)).toEqual(["cooling", "ready"]);
    expect((await cooldowns.states(byokModel, "globex")).map((s) => s.kind)).toEqual(["ready", "ready"]);
    // A shared deployment's state is every organization's.
    expect(await cooldowns.failed(model.deployments[1]!, POLICY, 30_000, "acme")).toBe(true);
    expect((await cooldowns.states(byokModel, "globex")).map((s) => s.kind)).toEqual(["ready", "cooling"]);
  });

  it("keeps a model's keys on one slot, under its hash tag", async () => {
    const cooldowns = new RedisCooldowns(redis.redis);
    const model = freshModel();
    for (const d of model.deployments) await cooldowns.failed(d, POLICY, 1_000);
    const keys = await scanKeys(redis.redis, `gw:llm:cooldown:{${model.name}}:*`);
    expect(keys.sort()).toEqual([
      `gw:llm:cooldown:{${model.name}}:0:cool`,
      `gw:llm:cooldown:{${model.name}}:0:probation`,
      `gw:llm:cooldown:{${model.name}}:1:cool`,
      `gw:llm:cooldown:{${model.name}}:1:probation`,
    ]);
  });
});
