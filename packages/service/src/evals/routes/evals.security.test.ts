import type { Permission } from "@gw/core/permissions";
import { PROVIDER_SECRETS } from "@gw/test-kit/llm-upstream";
import { describe, expect, it } from "vitest";
import { evalClient, finished, SCHEDULES } from "../../../test/evals-client.ts";
import { llmError, useStack } from "../../../test/stack.ts";

const stack = useStack();

const body = { name: "s", inputs: ["x"], cron: "0 0 1 1 *" };

describe("eval schedule security", () => {
  it.each<[string, Permission[], Record<string, number>]>([
    ["evals:read", ["evals:read"], { create: 403, list: 200, get: 200, runs: 200, delete: 403 }],
    ["evals:write", ["evals:write"], { create: 200, list: 403, get: 403, runs: 403, delete: 200 }],
    [
      "no eval permission",
      ["responses:write", "usage:read"],
      { create: 403, list: 403, get: 403, runs: 403, delete: 403 },
    ],
  ])("a key with %s", async (_label, permissions, expected) => {
    const owner = await stack.createKey();
    const schedule = await evalClient(stack, owner.secret).created(body);
    const key = await stack.createKey({ org: owner.org, permissions });
    const evals = evalClient(stack, key.secret);
    const got = {
      create: (await evals.create(body)).status,
      list: (await evals.list()).status,
      get: (await evals.get(schedule.id)).status,
      runs: (await evals.runs(schedule.id)).status,
      delete: (await evals.delete(schedule.id)).status,
    };
    expect(got).toEqual(expected);
  });

  it("a 403 names the missing permission in JSON", async () => {
    const key = await stack.createKey({ permissions: ["evals:read"] });
    const res = await evalClient(stack, key.secret).create(body);
    expect(await res.json()).toEqual(
      llmError("forbidden", "This credential lacks the 'evals:write' permission"),
    );
  });

  it("another organization sees nothing: its reads and deletes answer 404 and change nothing", async () => {
    const owner = await stack.createKey();
    const mine = evalClient(stack, owner.secret);
    const schedule = await mine.created({ name: "private", inputs: ["secret input"], every_seconds: 1 });
    await mine.untilRuns(schedule.id, (r) => expect(finished(r).length).toBeGreaterThan(0));

    const stranger = await stack.createKey(); // a fresh organization, with every eval permission
    const theirs = evalClient(stack, stranger.secret, "alice");
    expect(await (await theirs.list()).json()).toEqual({ object: "list", data: [], has_more: false });
    for (const res of [
      await theirs.get(schedule.id),
      await theirs.runs(schedule.id),
      await theirs.delete(schedule.id),
    ]) {
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual(llmError("not_found", `No eval schedule ${schedule.id}`));
    }
    // A cursor from another organization is no way in either.
    expect((await theirs.list(`?after=${schedule.id}`)).status).toBe(422);

    // The schedule lives on for its organization.
    expect((await mine.get(schedule.id)).status).toBe(200);
    const before = (await mine.allRuns(schedule.id)).length;
    await mine.untilRuns(schedule.id, (r) => expect(r.length).toBeGreaterThan(before));
    expect((await mine.delete(schedule.id)).status).toBe(200);
  });

  it("an end user sees and deletes only its own schedules; the key acting as its owner, every one of the organization", async () => {
    const key = await stack.createKey();
    const schedule = await evalClient(stack, key.secret, "alice").created(body);
    const bob = evalClient(stack, key.secret, "bob");
    expect((await (await bob.list()).json()).data).toEqual([]);
    expect((await bob.get(schedule.id)).status).toBe(404);
    expect((await bob.delete(schedule.id)).status).toBe(404);
    const owner = await stack.call(key.secret, SCHEDULES);
    expect((await owner.json()).data.map((s: { id: string }) => s.id)).toEqual([schedule.id]);
    expect((await stack.call(key.secret, `${SCHEDULES}/${schedule.id}`, { method: "DELETE" })).status).toBe(
      200,
    );
  });

  it("a failing provider fails the run in the service's words; what it said never reaches the run", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    stack.llm.mode = "fail";
    let runs: Awaited<ReturnType<typeof evals.allRuns>>;
    try {
      const schedule = await evals.created({ name: "leaky", inputs: ["x"], every_seconds: 1 });
      runs = await evals.untilRuns(schedule.id, (r) => expect(finished(r).length).toBeGreaterThan(0));
      expect((await evals.delete(schedule.id)).status).toBe(200);
    } finally {
      stack.llm.mode = "ok";
    }
    const run = finished(runs)[0]!;
    expect(run).toMatchObject({
      status: "failed",
      results: [],
      error: expect.stringMatching(/^The model provider failed/),
    });
    const text = JSON.stringify(runs);
    for (const secret of Object.values(PROVIDER_SECRETS)) expect(text).not.toContain(secret);
  });
});
