import { randomUUID } from "node:crypto";
import type { Limits } from "@gw/core/limits";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { CountingWindows } from "@gw/core/windows";
import { OrgLimitsStore } from "@gw/gateway";
import { describe, expect, it } from "vitest";
import { evalClient, finished, type RunJson } from "../../../test/evals-client.ts";
import { llmError, useStack } from "../../../test/stack.ts";

/**
 * Eval runs call the model through the same pipeline as responses: the
 * creator key's model allowlist (at creation and at every run), its and its
 * end user's request, token and spend windows, the output cap sent to the
 * provider, settlement, usage. A refusal fails the run without a model call.
 */
const MINI = "gpt-4o-mini";
const LARGE = "gpt-4o";
const stack = useStack({
  LLM_MODELS: `${MINI}=0.15/0.075/0.6,${LARGE}=2.5/1.25/10`,
  LLM_DEFAULT_MODEL: MINI,
  LLM_DEFAULT_MAX_OUTPUT_TOKENS: "32",
});

const used = async (keyId: string, limits: Limits, user?: string) =>
  Object.fromEntries(
    (await new CountingWindows(stack.redis).peek(keyId, user, limits)).map((s) => [
      `${s.scope}:${s.unit}:${s.window}`,
      s.used,
    ]),
  );

/** The model requests that carried `marker` (each eval input is sent as the last user message). */
const modelCallsWith = (marker: string) =>
  stack.llm.requests.filter((r) => r.body.messages.some((m) => m.content?.includes(marker)));

const failedRuns = (runs: RunJson[]) => runs.filter((r) => r.status === "failed");

describe("eval schedules under the creator key's budgets", () => {
  it("refuses a schedule on a model outside the key's allowlist (403 as /responses), by API key or by the key's JWT", async () => {
    const key = await stack.createKey({ models: [MINI] });
    const res = await evalClient(stack, key.secret).create({
      name: "large",
      model: LARGE,
      inputs: ["x"],
      every_seconds: 60,
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual(
      llmError("forbidden", `This API key may not use the model '${LARGE}'`, "model"),
    );
    const exchanged = await stack.call(key.secret, "/api/v1/authentication/api-keys/exchange-token", {
      json: { audience: "https://gateway.test", externalUserId: "carol" },
    });
    const { token } = await exchanged.json();
    const byJwt = await stack.call(token, "/api/v1/llm/evals/schedules", {
      json: { name: "large", model: LARGE, inputs: ["x"], every_seconds: 60 },
    });
    expect(byJwt.status).toBe(403);
    // The allowed model, and `auto` (the default model, allowed), are accepted.
    for (const model of [MINI, "auto"]) {
      const ok = await evalClient(stack, key.secret).create({
        name: "ok",
        model,
        inputs: ["x"],
        cron: "0 0 1 1 *",
      });
      expect(ok.status).toBe(200);
    }
  });

  it("admits each model call of a run under the key's and the end user's windows, sends the output cap, settles and records usage", async () => {
    const limits: Limits = {
      minute: 100,
      tokens: { day: 100_000 },
      spend: { day: 1 },
      endUser: { minute: 100, tokens: { day: 50_000 } },
    };
    const key = await stack.createKey({ limits });
    const evals = evalClient(stack, key.secret, "dave");
    const marker = `budgeted-${Date.now()}`;
    const schedule = await evals.created({
      name: "budgeted",
      inputs: [`${marker} one`, `${marker} two`],
      every_seconds: 3600,
    });
    const [run] = await evals.untilRuns(schedule.id, (r) => expect(finished(r)).toHaveLength(1));
    expect(run!.status).toBe("completed");
    await evals.delete(schedule.id);
    const calls = modelCallsWith(marker);
    expect(calls).toHaveLength(2);
    for (const call of calls) expect(call.body.max_tokens).toBe(32); // the cap the reservation counted
    const tokens = run!.usage.total_tokens;
    expect(tokens).toBeGreaterThan(0);
    // Settled to what the provider reported, in the key's windows and the end user's.
    const counts = await used(key.id, limits, "dave");
    expect(counts["key:tokens:day"]).toBe(tokens);
    expect(counts["endUser:tokens:day"]).toBe(tokens);
    // One request per model call (the key's request window also holds the test's own API calls).
    expect(counts["endUser:requests:minute"]).toBe(2);
    expect(counts["key:spend:day"]).toBeGreaterThan(0);
    // Usage records the run's calls under the key and the end user.
    const day = new Date().toISOString().slice(0, 10);
    const usage = await (await stack.call(key.secret, `/api/v1/usage?start=${day}&group_by=end_user`)).json();
    expect(usage.data).toEqual([
      expect.objectContaining({ end_user: "dave", requests: 2, total_tokens: tokens }),
    ]);
  });

  it("a run refused by a token budget fails saying so, without calling the model; the schedule's next runs too", async () => {
    const limits: Limits = { tokens: { minute: 50 }, spend: { day: 0.000001 } };
    const key = await stack.createKey({ models: [MINI], limits });
    const evals = evalClient(stack, key.secret);
    const marker = `over-${Date.now()}`;
    const schedule = await evals.created({
      name: "over budget",
      inputs: [`${marker} ${"long input ".repeat(1000)}`],
      every_seconds: 1,
    });
    const runs = await evals.untilRuns(schedule.id, (r) =>
      expect(failedRuns(r).length).toBeGreaterThanOrEqual(2),
    );
    await evals.delete(schedule.id);
    for (const run of failedRuns(runs)) {
      expect(run.error).toMatch(
        /^Refused by a budget of the schedule's key: Rate limit exceeded \(key (tokens|spend) /,
      );
      expect(run.results).toEqual([]);
    }
    expect(modelCallsWith(marker)).toHaveLength(0);
    expect(await used(key.id, limits)).toEqual({ "key:tokens:minute": 0, "key:spend:day": 0 });
  });

  it("counts each model call of a run in the key's request windows, even without budgets: past them the run fails", async () => {
    const limits: Limits = { day: 3 };
    const key = await stack.createKey({ limits });
    const reader = await stack.createKey({ org: key.org }); // reads the runs: the key's own windows fill up
    const marker = `requests-${Date.now()}`;
    const schedule = await evalClient(stack, key.secret).created({
      name: "requests",
      inputs: [`${marker} a`, `${marker} b`, `${marker} c`],
      every_seconds: 3600,
    });
    // The create counted one request: two model calls fit, the third is refused before the model.
    const [run] = await evalClient(stack, reader.secret).untilRuns(schedule.id, (r) =>
      expect(finished(r)).toHaveLength(1),
    );
    await evalClient(stack, reader.secret).delete(schedule.id);
    expect(run!.status).toBe("failed");
    expect(run!.error).toBe(
      "Refused by a budget of the schedule's key: Rate limit exceeded (key requests day)",
    );
    expect(run!.results).toHaveLength(2);
    expect(modelCallsWith(marker)).toHaveLength(2);
    expect(await used(key.id, limits)).toEqual({ "key:requests:day": 3 });
  });

  it("an end user's budget (the organization's default for end users) refuses the runs of a schedule created for that user", async () => {
    const key = await stack.createKey();
    await new OrgLimitsStore(stack.redis).update(key.org, { tokens: { day: 5 } });
    const marker = `eu-${Date.now()}`;
    const evals = evalClient(stack, key.secret, "erin");
    const schedule = await evals.created({ name: "eu", inputs: [`${marker} hi`], every_seconds: 3600 });
    const [run] = await evals.untilRuns(schedule.id, (r) => expect(finished(r)).toHaveLength(1));
    await evals.delete(schedule.id);
    expect(run!.status).toBe("failed");
    expect(run!.error).toContain("endUser tokens day");
    expect(modelCallsWith(marker)).toHaveLength(0);
  });

  it("checks the key's allowlist at every run: a model removed from it fails the next run without a model call", async () => {
    const key = await stack.createKey({ models: [MINI, LARGE] });
    const evals = evalClient(stack, key.secret);
    const marker = `allow-${Date.now()}`;
    const schedule = await evals.created({
      name: "allow",
      model: LARGE,
      inputs: [`${marker} hi`],
      every_seconds: 1,
    });
    await evals.untilRuns(schedule.id, (r) => expect(r.some((run) => run.status === "completed")).toBe(true));
    await stack.store.update(key.id, { models: [MINI] });
    const before = modelCallsWith(marker).length;
    const runs = await evals.untilRuns(schedule.id, (r) => expect(failedRuns(r).length).toBeGreaterThan(0));
    await evals.delete(schedule.id);
    expect(failedRuns(runs)[0]!.error).toBe(`This API key may not use the model '${LARGE}'`);
    // At most a run already past its check when the allowlist changed called the model.
    expect(modelCallsWith(marker).length).toBeLessThanOrEqual(before + 1);
  });

  it.each(["revoked", "deleted"] as const)(
    "a %s creator key fails every run, without a model call",
    async (what) => {
      const key = await stack.createKey();
      const other = await stack.createKey({ org: key.org }); // to delete the schedule afterwards
      const evals = evalClient(stack, key.secret);
      const marker = `${what}-${Date.now()}`;
      const schedule = await evals.created({ name: what, inputs: [`${marker} hi`], every_seconds: 1 });
      await evals.untilRuns(schedule.id, (r) =>
        expect(r.some((run) => run.status === "completed")).toBe(true),
      );
      if (what === "revoked") await stack.store.revoke(key.id);
      else await stack.redis.del(`gw:apikey:${key.id}`);
      const before = modelCallsWith(marker).length;
      // The schedule's runs go on until someone deletes it: each fails before the model.
      const runs = await evalClient(stack, other.secret).untilRuns(schedule.id, (r) =>
        expect(failedRuns(r).length).toBeGreaterThanOrEqual(2),
      );
      expect((await evalClient(stack, other.secret).delete(schedule.id)).status).toBe(200);
      for (const run of failedRuns(runs)) {
        expect(run.error).toBe(`The API key that created the schedule was ${what}`);
        expect(run.results).toEqual([]);
      }
      // At most a run already past its check when the key changed called the model.
      expect(modelCallsWith(marker).length).toBeLessThanOrEqual(before + 1);
    },
  );
});

describe("eval runs follow their creator key's rights, as an administrator changes them", () => {
  /** A PATCH of the key through the admin API, as an administrator of its organization makes it. */
  async function patchKey(adminSecret: string, id: string, body: Record<string, unknown>) {
    const res = await stack.call(adminSecret, `/api/v1/admin/api-keys/${id}`, {
      method: "PATCH",
      json: body,
    });
    expect(res.status).toBe(200);
  }
  const without = (permission: string) => DEFAULT_PERMISSIONS.filter((p) => p !== permission);

  it.each<[string, Record<string, unknown> | "alice gets a key", string]>([
    [
      "evals:write is taken away",
      { permissions: without("evals:write") },
      "The API key that created the schedule no longer has the permission 'evals:write'",
    ],
    [
      "the permission model calls need is taken away",
      { permissions: without("responses:write") },
      "The API key that created the schedule no longer has the permission 'responses:write', which model calls need",
    ],
    [
      "its on-behalf-of policy no longer covers the schedule's end user",
      { onBehalfOf: { prefixes: ["acme-"] } },
      "The schedule's end user 'alice' is outside this API key's X-On-Behalf-Of policy: it may act for only end users whose id starts with 'acme-'",
    ],
    [
      "the schedule's end user comes to own a key of the organization",
      "alice gets a key",
      "The schedule's end user 'alice' owns an API key of this organization, and this API key's X-On-Behalf-Of policy does not name them in users",
    ],
  ])("when %s, the next runs fail saying so, without a model call", async (_name, change, reason) => {
    const key = await stack.createKey();
    // The organization's administrator, who also reads and deletes every schedule of it, whatever becomes of the key.
    const admin = await stack.createKey({
      org: key.org,
      owner: "root",
      permissions: ["admin:api-keys", "evals:read", "evals:write", "organization:read"],
    });
    const marker = `rights-${randomUUID()}`;
    const schedule = await evalClient(stack, key.secret).created({
      name: "rights",
      inputs: [`${marker} hi`],
      every_seconds: 1,
    });
    const evals = evalClient(stack, admin.secret, "root");
    await evals.untilRuns(schedule.id, (r) => expect(r.some((run) => run.status === "completed")).toBe(true));

    if (change === "alice gets a key") {
      const created = await stack.call(admin.secret, "/api/v1/admin/api-keys", { json: { owner: "alice" } });
      expect(created.status).toBe(201);
    } else await patchKey(admin.secret, key.id, change);
    const before = modelCallsWith(marker).length;
    const runs = await evals.untilRuns(schedule.id, (r) =>
      expect(failedRuns(r).length).toBeGreaterThanOrEqual(2),
    );
    expect((await evals.delete(schedule.id)).status).toBe(200);
    for (const run of failedRuns(runs)) {
      expect(run.error).toBe(reason);
      expect(run.results).toEqual([]);
    }
    // At most a run already past its check when the key changed called the model.
    expect(modelCallsWith(marker).length).toBeLessThanOrEqual(before + 1);
  });
});
