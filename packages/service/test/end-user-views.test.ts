import { describe, expect, it } from "vitest";
import { utcDay } from "../src/usage/store.ts";
import { SCHEDULES } from "./evals-client.ts";
import { useStack } from "./stack.ts";

const stack = useStack();

/** How a request acts: the key alone (its owner), with `X-On-Behalf-Of`, or with a token exchanged for an end user. */
type Actor = { secret: string; user?: string };

const get = (actor: Actor, path: string) =>
  stack.call(actor.secret, path, actor.user ? { user: actor.user } : {});
const post = (actor: Actor, path: string, json: unknown) =>
  stack.call(actor.secret, path, { json, ...(actor.user ? { user: actor.user } : {}) });

async function token(secret: string, externalUserId: string): Promise<string> {
  const res = await stack.call(secret, "/api/v1/authentication/api-keys/exchange-token", {
    json: { audience: "https://gateway.test", externalUserId },
  });
  expect(res.status).toBe(200);
  return (await res.json()).token;
}

async function usage(actor: Actor, groupBy: string) {
  const today = utcDay(new Date());
  const res = await get(actor, `/api/v1/usage?start=${today}&end=${today}&group_by=${groupBy}`);
  expect(res.status).toBe(200);
  return res.json();
}

async function schedule(actor: Actor, name: string): Promise<string> {
  const res = await post(actor, SCHEDULES, { name, inputs: ["hello"], cron: "0 0 1 1 *" });
  expect(res.status).toBe(200);
  return (await res.json()).id;
}

const listed = async (actor: Actor) => {
  const res = await get(actor, SCHEDULES);
  expect(res.status).toBe(200);
  return ((await res.json()).data as { name: string }[]).map((s) => s.name).sort();
};

describe("end users see only what is theirs", () => {
  it("usage and eval schedules: carol and dave their own, the owner key the organization's, another organization nothing", async () => {
    const key = await stack.createKey(); // owner: backend, default permissions
    const owner: Actor = { secret: key.secret };
    const carol: Actor = { secret: key.secret, user: "carol" };
    const dave: Actor = { secret: key.secret, user: "dave" };
    const carolToken: Actor = { secret: await token(key.secret, "carol") };
    for (const [actor, times] of [
      [carol, 2],
      [dave, 1],
      [owner, 1],
    ] as const) {
      for (let i = 0; i < times; i++)
        expect((await post(actor, "/api/v1/llm/responses", { input: "one two" })).status).toBe(200);
    }
    const ids = {
      carol: await schedule(carol, "carol's"),
      dave: await schedule(dave, "dave's"),
      owner: await schedule(owner, "backend's"),
    };

    for (const asCarol of [carol, carolToken]) {
      const byUser = await usage(asCarol, "end_user");
      expect(byUser.data.map((r: { end_user: string }) => r.end_user)).toEqual(["carol"]);
      expect(byUser.totals.requests).toBe(2);
      expect(byUser.totals.total_tokens).toBe(byUser.data[0].total_tokens);
      const byModel = await usage(asCarol, "model");
      expect(byModel.data.map((r: { requests: number }) => r.requests)).toEqual([2]);
      const byKey = await usage(asCarol, "key");
      expect(byKey.data).toEqual([expect.objectContaining({ key_id: key.id, requests: 2 })]);
      expect(await listed(asCarol)).toEqual(["carol's"]);
      for (const other of [ids.dave, ids.owner]) {
        expect((await get(asCarol, `${SCHEDULES}/${other}`)).status).toBe(404);
        expect((await get(asCarol, `${SCHEDULES}/${other}/runs`)).status).toBe(404);
      }
      expect((await get(asCarol, `${SCHEDULES}/${ids.carol}`)).status).toBe(200);
      expect((await get(asCarol, `${SCHEDULES}/${ids.carol}/runs`)).status).toBe(200);
    }
    expect(
      (await stack.call(key.secret, `${SCHEDULES}/${ids.dave}`, { method: "DELETE", user: "carol" })).status,
    ).toBe(404);
    const daveUsage = await usage(dave, "user");
    expect(daveUsage.data.map((r: { user: string }) => r.user)).toEqual(["dave"]);
    expect(daveUsage.totals.requests).toBe(1);
    expect(await listed(dave)).toEqual(["dave's"]);

    // The key acting as its owner sees the organization's.
    const all = await usage(owner, "end_user");
    expect(all.totals.requests).toBe(4);
    expect(all.data.map((r: { end_user: string }) => r.end_user).sort()).toEqual([
      "backend",
      "carol",
      "dave",
    ]);
    expect(await listed(owner)).toEqual(["backend's", "carol's", "dave's"]);
    expect((await get(owner, `${SCHEDULES}/${ids.dave}/runs`)).status).toBe(200);
    // X-On-Behalf-Of naming the owner itself is the owner.
    expect((await usage({ secret: key.secret, user: "backend" }, "end_user")).totals.requests).toBe(4);

    // Another organization sees none of it, as its owner or its end users.
    const other = await stack.createKey();
    for (const actor of [{ secret: other.secret }, { secret: other.secret, user: "carol" }]) {
      const theirs = await usage(actor, "end_user");
      expect(theirs.totals.requests).toBe(0);
      expect(theirs.data).toEqual([]);
      expect(await listed(actor)).toEqual([]);
      expect((await get(actor, `${SCHEDULES}/${ids.carol}`)).status).toBe(404);
    }
  });

  it("a key with organization:read lets its end users see the organization's views", async () => {
    const key = await stack.createKey({
      permissions: ["responses:write", "usage:read", "evals:read", "evals:write", "organization:read"],
    });
    const plain = await stack.createKey({ org: key.org }); // default permissions: no organization:read
    for (const user of ["carol", "dave"])
      expect((await post({ secret: key.secret, user }, "/api/v1/llm/responses", { input: "x" })).status).toBe(
        200,
      );
    await schedule({ secret: plain.secret, user: "dave" }, "dave's");
    for (const carol of [
      { secret: key.secret, user: "carol" },
      { secret: await token(key.secret, "carol") },
    ]) {
      const seen = await usage(carol, "end_user");
      expect(seen.data.map((r: { end_user: string }) => r.end_user).sort()).toEqual(["carol", "dave"]);
      expect(await listed(carol)).toEqual(["dave's"]);
    }
    // A token minted without it, from the same key, is confined again.
    const narrow = await stack.call(key.secret, "/api/v1/authentication/api-keys/exchange-token", {
      json: {
        audience: "https://gateway.test",
        externalUserId: "carol",
        permissions: ["usage:read", "evals:read"],
      },
    });
    const confined = { secret: (await narrow.json()).token as string };
    expect((await usage(confined, "end_user")).data.map((r: { end_user: string }) => r.end_user)).toEqual([
      "carol",
    ]);
    expect(await listed(confined)).toEqual([]);
  });
});
