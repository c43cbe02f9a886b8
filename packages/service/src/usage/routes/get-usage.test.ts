import { REDIS_TOPOLOGIES } from "@gw/test-kit";
import { beforeEach, describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";
import { utcDay } from "../store.ts";

describe.each(REDIS_TOPOLOGIES)("on %s Redis", (topology) => {
  // A stream the provider stalls midway breaks at the provider's timeout.
  const stack = useStack(
    { LLM_MODELS: "echo-small,echo-large", LLM_TIMEOUT_MS: "1000" },
    {},
    undefined,
    topology,
  );
  let today = utcDay(new Date());
  beforeEach(() => {
    today = utcDay(new Date()); // a run across UTC midnight asks about the day it recorded in
  });

  describe("usage", () => {
    it("totals completed responses per model, end user and key for the caller's organization", async () => {
      const key = await stack.createKey();
      const second = await stack.createKey({ org: key.org });
      const ask = (secret: string, user: string, model: string) =>
        stack.call(secret, "/api/v1/llm/responses", { json: { model, input: "one two" }, user });
      for (const [secret, user, model] of [
        [key.secret, "alice", "auto"],
        [key.secret, "alice", "echo-large"],
        [second.secret, "bob", "echo-large"],
      ] as const) {
        expect((await ask(secret, user, model)).status).toBe(200);
      }
      // Each answer: input 5 tokens ("one two" + 3), output 3 ("Echo: one two").
      const usage = async (query: string) =>
        (await stack.call(key.secret, `/api/v1/usage?start=${today}&end=${today}${query}`)).json();
      const all = await usage("");
      expect(all).toMatchObject({
        object: "usage",
        start: today,
        end: today,
        group_by: null,
        totals: {
          requests: 3,
          input_tokens: 15,
          output_tokens: 9,
          total_tokens: 24,
          cost_usd: 0,
          cached_requests: 0,
        },
      });
      expect((await usage("&group_by=model")).data).toEqual([
        {
          model: "echo-large-2026-01-01",
          requests: 2,
          input_tokens: 10,
          output_tokens: 6,
          total_tokens: 16,
          cost_usd: 0,
          cached_requests: 0,
          // The deployment that served them: the shorthand's, an OpenAI-compatible API, by the name asked for.
          deployments: [
            {
              provider: "openai",
              model: "echo-large",
              requests: 2,
              input_tokens: 10,
              output_tokens: 6,
              total_tokens: 16,
              cost_usd: 0,
              cached_requests: 0,
            },
          ],
        },
        {
          model: "echo-small-2026-01-01",
          requests: 1,
          input_tokens: 5,
          output_tokens: 3,
          total_tokens: 8,
          cost_usd: 0,
          cached_requests: 0,
          deployments: [
            {
              provider: "openai",
              model: "echo-small",
              requests: 1,
              input_tokens: 5,
              output_tokens: 3,
              total_tokens: 8,
              cost_usd: 0,
              cached_requests: 0,
            },
          ],
        },
      ]);
      expect(
        (await usage("&group_by=user")).data.map((r: { user: string; requests: number }) => [
          r.user,
          r.requests,
        ]),
      ).toEqual([
        ["alice", 2],
        ["bob", 1],
      ]);
      expect((await usage("&group_by=key")).data.map((r: { key_id: string }) => r.key_id).sort()).toEqual(
        [key.id, second.id].sort(),
      );

      // Another organization sees none of it.
      const other = await stack.createKey();
      const theirs = await (await stack.call(other.secret, `/api/v1/usage?start=${today}`)).json();
      expect(theirs.totals).toEqual({
        requests: 0,
        input_tokens: 0,
        output_tokens: 0,
        total_tokens: 0,
        cost_usd: 0,
        cached_requests: 0,
      });
    });

    it("records nothing for a request refused with 429, or one that fails before the model answers", async () => {
      const key = await stack.createKey({ limits: { minute: 2 } });
      const ask = () =>
        stack.call(key.secret, "/api/v1/llm/responses", { json: { input: "x" }, user: "alice" });
      expect((await ask()).status).toBe(200);
      const before = stack.llm.requests.length;
      stack.llm.mode = "fail";
      try {
        expect((await ask()).status).toBe(502);
      } finally {
        stack.llm.mode = "ok";
      }
      const refused = await ask();
      expect(refused.status).toBe(429);
      expect(stack.llm.requests.length).toBe(before + 1); // the failed call reached it; the refused one did not
      const viewer = await stack.createKey({ org: key.org });
      const usage = await (await stack.call(viewer.secret, `/api/v1/usage?start=${today}`)).json();
      expect(usage.totals.requests).toBe(1);
    });

    it("counts what a stream produced before it broke, and stores no response", async () => {
      const key = await stack.createKey();
      stack.llm.mode = "stall-midstream";
      try {
        const res = await stack.call(key.secret, "/api/v1/llm/responses", {
          json: { input: "one two three", stream: true },
          user: "alice",
        });
        expect(await res.text()).toContain("event: response.failed");
      } finally {
        stack.llm.mode = "ok";
      }
      const usage = await (await stack.call(key.secret, `/api/v1/usage?start=${today}`)).json();
      expect(usage.totals.requests).toBe(1);
      expect(usage.totals.output_tokens).toBeGreaterThan(0);
    });

    it("refuses a model outside LLM_MODELS with 422", async () => {
      const key = await stack.createKey();
      const res = await stack.call(key.secret, "/api/v1/llm/responses", {
        json: { model: "gpt-9", input: "x" },
        user: "a",
      });
      expect(res.status).toBe(422);
      expect((await res.json()).detail[0]).toMatchObject({
        loc: ["body", "model"],
        type: "enum",
        input: "gpt-9",
      });
    });

    it.each([
      ["", "query.start:missing"],
      ["?start=2026-13-01", "query.start:value_error"],
      ["?start=2026-01-02&end=2026-01-01", "query.end:value_error"],
      ["?start=2020-01-01&end=2026-01-01", "query.end:value_error"],
      ["?start=2026-01-01&group_by=colour", "query.group_by:enum"],
    ])("validates %s", async (query, expected) => {
      const key = await stack.createKey();
      const res = await stack.call(key.secret, `/api/v1/usage${query}`);
      expect(res.status).toBe(422);
      const got = (await res.json()).detail.map(
        (d: { loc: string[]; type: string }) => `${d.loc.join(".")}:${d.type}`,
      );
      expect(got).toEqual([expected]);
    });

    it("needs usage:read", async () => {
      const key = await stack.createKey({ permissions: ["responses:write"] });
      expect((await stack.call(key.secret, `/api/v1/usage?start=${today}`)).status).toBe(403);
    });
  });
});
