import { ManualClock } from "@gw/core/clock";
import { describe, expect, it, vi } from "vitest";
import { ids } from "../ids.ts";
import {
  Catalogue,
  type CatalogueModel,
  DEFAULT_ROUTING,
  type Deployment,
  type ProviderKind,
  type RoutingPolicy,
} from "./catalogue.ts";
import { type Cooldowns, type DeploymentState, READY } from "./cooldowns.ts";
import { ProviderFailed, ProviderRateLimited, ProviderTimeout } from "./errors.ts";
import type { ChatRequest, Completion, ModelProvider, StreamSeen, ToolCallDelta } from "./provider.ts";
import { ModelRouter, pickDeployment, type RouterSettings } from "./router.ts";

/** What a fake deployment does with each call: answer, fail with an error, or hang until the call is aborted. */
type Behaviour = "ok" | "hang" | Error | { pieces: string[]; thenFail?: Error };

/** Fake adapters: each deployment's calls, as the router made them, and what the deployment does. */
function fakeAdapters() {
  const calls: { deployment: string; request: ChatRequest }[] = [];
  const closed: string[] = [];
  const behaviour = new Map<string, Behaviour>();
  const completion = (deployment: Deployment, request: ChatRequest): Completion => ({
    text: `from ${deployment.id}`,
    toolCalls: [],
    finishReason: "stop",
    model: request.model,
    usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
    usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
  });
  const hang = (signal: AbortSignal) =>
    new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
  const factory = (deployment: Deployment): ModelProvider => ({
    async complete(request, signal) {
      calls.push({ deployment: deployment.id, request });
      const does = behaviour.get(deployment.id) ?? "ok";
      if (does === "hang") return hang(signal);
      if (does instanceof Error) throw does;
      return completion(deployment, request);
    },
    async *stream(request, signal): AsyncGenerator<string | ToolCallDelta, Completion> {
      calls.push({ deployment: deployment.id, request });
      try {
        const does = behaviour.get(deployment.id) ?? "ok";
        if (does === "hang") return await hang(signal);
        if (does instanceof Error) throw does;
        if (does === "ok") {
          yield `from ${deployment.id}`;
          return completion(deployment, request);
        }
        for (const piece of does.pieces) yield piece;
        if (does.thenFail) throw does.thenFail;
        return completion(deployment, request);
      } finally {
        closed.push(deployment.id); // where an adapter lets go of its connection
      }
    },
  });
  const adapters = { openai: factory, azure: factory, anthropic: factory } as Record<
    ProviderKind,
    typeof factory
  >;
  return {
    calls,
    closed,
    behaviour,
    adapters,
    called: (id: string) => calls.filter((c) => c.deployment === id).length,
  };
}

/** Shared state in memory, recording what the router told it. */
function memoryCooldowns(states: Record<string, DeploymentState> = {}) {
  const events: string[] = [];
  const claimable = new Set<string>();
  const cooldowns: Cooldowns = {
    states: async (model: CatalogueModel) => model.deployments.map((d) => states[d.id] ?? READY),
    failed: async (d, _policy, coolMs) => {
      events.push(`failed ${d.id}${coolMs === undefined ? "" : ` cool ${coolMs}`}`);
      return coolMs !== undefined;
    },
    claimProbe: async (d) => {
      events.push(`claim ${d.id}`);
      return claimable.has(d.id);
    },
    recovered: async (d) => void events.push(`recovered ${d.id}`),
    releaseProbe: async (d) => void events.push(`release ${d.id}`),
  };
  return { cooldowns, events, claimable };
}

function deployment(model: string, index: number, overrides: Partial<Deployment> = {}): Deployment {
  return {
    id: `${model}#${index}`,
    modelName: model,
    index,
    provider: "openai",
    baseUrl: `http://deployment-${index}.invalid/v1`,
    apiKey: `key-${index}`,
    upstreamModel: `${model}-upstream-${index}`,
    weight: 1,
    priority: 0,
    timeoutMs: 1_000,
    price: undefined,
    apiVersion: undefined,
    byok: false,
    ...overrides,
  };
}

function model(name: string, deployments: Partial<Deployment>[], fallbacks: string[] = []): CatalogueModel {
  const list = deployments.map((d, i) => deployment(name, i, d));
  return { name, fallbacks, deployments: list, canCool: list.length > 1 || fallbacks.length > 0 };
}

function router(
  models: CatalogueModel[],
  options: {
    routing?: Partial<RoutingPolicy>;
    settings?: Partial<RouterSettings>;
    cooldowns?: Cooldowns;
    random?: () => number;
    clock?: ManualClock;
  } = {},
) {
  const fakes = fakeAdapters();
  const clock = options.clock ?? new ManualClock();
  const memory = memoryCooldowns();
  const routing = { ...DEFAULT_ROUTING, ...options.routing };
  const instance = new ModelRouter({
    catalogue: new Catalogue({ models, routing }),
    adapters: fakes.adapters,
    adapterOptions: { maxResponseBytes: 1 << 20, maxEventChars: 1 << 16, ids: ids(clock) },
    cooldowns: options.cooldowns ?? memory.cooldowns,
    clock,
    random: options.random ?? (() => 0),
    settings: { deadlineMs: 10_000, backoffMs: 0, retryAfterMaxMs: 5_000, ...options.settings },
  });
  return { router: instance, ...fakes, clock, events: memory.events };
}

const ask = (name: string, fallbacks: string[] = []): ChatRequest => ({
  model: name,
  route: { fallbacks },
  messages: [{ role: "user", content: "hello" }],
});
const signal = () => new AbortController().signal;
const serverError = () => new ProviderFailed("it answered HTTP 500", { status: 500 });

describe("choosing a deployment", () => {
  const list = model("m", [
    { priority: 1, weight: 5 },
    { priority: 0, weight: 1 },
    { priority: 0, weight: 3 },
    { priority: 0, weight: 4 },
  ]).deployments;
  const all = () => true;

  it("chooses by weight among the best priority only", () => {
    // Weights 1, 3 and 4 of 8: [0, 0.125) is the first, [0.125, 0.5) the second, [0.5, 1) the third.
    expect(pickDeployment(list, all, () => 0)?.id).toBe("m#1");
    expect(pickDeployment(list, all, () => 0.1249)?.id).toBe("m#1");
    expect(pickDeployment(list, all, () => 0.125)?.id).toBe("m#2");
    expect(pickDeployment(list, all, () => 0.4999)?.id).toBe("m#2");
    expect(pickDeployment(list, all, () => 0.5)?.id).toBe("m#3");
    expect(pickDeployment(list, all, () => 0.9999)?.id).toBe("m#3");
  });

  it("goes to the next priority only when none of the best is available", () => {
    expect(
      pickDeployment(
        list,
        (d) => d.priority > 0,
        () => 0.5,
      )?.id,
    ).toBe("m#0");
    expect(
      pickDeployment(
        list,
        (d) => d.id !== "m#1",
        () => 0,
      )?.id,
    ).toBe("m#2");
    expect(
      pickDeployment(
        list,
        () => false,
        () => 0,
      ),
    ).toBeUndefined();
  });
});

describe("routing a call", () => {
  it("retries a failure before the first byte on another deployment, and says which one served", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", serverError());
    const completion = await r.router.complete(ask("m"), signal());
    expect(completion.text).toBe("from m#1");
    expect(completion.servedBy).toMatchObject({
      model: "m",
      deployment: "m#1",
      upstreamModel: "m-upstream-1",
    });
    expect(r.calls.map((c) => [c.deployment, c.request.model])).toEqual([
      ["m#0", "m-upstream-0"],
      ["m#1", "m-upstream-1"],
    ]);
    expect(r.events).toEqual(["failed m#0"]);
  });

  it.each([
    ["a timeout", new ProviderTimeout()],
    ["a refused connection", new ProviderFailed("it could not be reached", { detail: "ECONNREFUSED" })],
    ["a 429", new ProviderRateLimited(null, "")],
    ["a 408", new ProviderFailed("x", { status: 408 })],
    ["a 409", new ProviderFailed("x", { status: 409 })],
    ["a 503", new ProviderFailed("x", { status: 503 })],
  ])("retries %s", async (_, error) => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", error);
    expect((await r.router.complete(ask("m"), signal())).text).toBe("from m#1");
  });

  it.each([400, 401, 404, 413, 422])(
    "never retries a %i (the caller's fault), nor counts it against the deployment",
    async (status) => {
      const r = router([model("m", [{}, { priority: 1 }])]);
      const error = new ProviderFailed(`it answered HTTP ${status}`, { status });
      r.behaviour.set("m#0", error);
      await expect(r.router.complete(ask("m"), signal())).rejects.toBe(error);
      expect(r.called("m#1")).toBe(0);
      expect(r.events).toEqual([]);
    },
  );

  it("makes at most `retries` further attempts, and then the last provider error is the call's", async () => {
    const r = router([model("m", [{}, { priority: 1 }, { priority: 2 }])], { routing: { retries: 1 } });
    const last = new ProviderFailed("it answered HTTP 502", { status: 502 });
    r.behaviour.set("m#0", serverError());
    r.behaviour.set("m#1", last);
    await expect(r.router.complete(ask("m"), signal())).rejects.toBe(last);
    expect(r.called("m#2")).toBe(0);
  });

  it("tries each deployment once, then the fallbacks in order, and only those the route names", async () => {
    const r = router([model("m", [{}, {}], ["f1", "f2"]), model("f1", [{}]), model("f2", [{}])], {
      routing: { retries: 5 },
    });
    r.behaviour.set("m#0", serverError());
    r.behaviour.set("m#1", serverError());
    r.behaviour.set("f1#0", serverError());
    const completion = await r.router.complete(ask("m", ["f1", "f2"]), signal());
    expect(completion.servedBy).toMatchObject({ model: "f2", deployment: "f2#0" });
    expect(r.calls.map((c) => c.deployment)).toEqual(["m#0", "m#1", "f1#0", "f2#0"]);

    // A route without f1 (the key may not use it) never reaches it.
    const limited = router([model("m", [{}], ["f1", "f2"]), model("f1", [{}]), model("f2", [{}])]);
    limited.behaviour.set("m#0", serverError());
    await limited.router.complete(ask("m", ["f2"]), signal());
    expect(limited.calls.map((c) => c.deployment)).toEqual(["m#0", "f2#0"]);
  });

  it("answers a call without a route from its own deployments alone", async () => {
    const r = router([model("m", [{}], ["f1"]), model("f1", [{}])]);
    const error = serverError();
    r.behaviour.set("m#0", error);
    await expect(r.router.complete({ ...ask("m"), route: undefined }, signal())).rejects.toBe(error);
    expect(r.called("f1#0")).toBe(0);
  });

  it("counts every attempt within the call's one deadline: one that passes it ends the call", async () => {
    const r = router([model("m", [{}, { priority: 1 }])], { settings: { deadlineMs: 1_000 } });
    r.behaviour.set("m#0", "hang");
    const call = r.router.complete(ask("m"), signal());
    const failure = expect(call).rejects.toMatchObject({ name: "ProviderTimeout", status: 504 });
    await vi.waitFor(() => expect(r.called("m#0")).toBe(1));
    r.clock.advance(1_000);
    await failure;
    expect(r.called("m#1")).toBe(0);
  });

  it("pauses before a retry, on the clock it is given (full jitter below the backoff)", async () => {
    const r = router([model("m", [{}, { priority: 1 }])], {
      settings: { backoffMs: 400 },
      random: () => 0.5,
    });
    r.behaviour.set("m#0", serverError());
    const call = r.router.complete(ask("m"), signal());
    await vi.waitFor(() => expect(r.clock.pending).toBe(2)); // the deadline, and the pause
    r.clock.advance(199);
    await Promise.resolve();
    expect(r.called("m#1")).toBe(0);
    r.clock.advance(1);
    expect((await call).text).toBe("from m#1");
  });

  it("does not pause past the deadline: the last error is the call's instead", async () => {
    const r = router([model("m", [{}, { priority: 1 }])], {
      settings: { backoffMs: 4_000, deadlineMs: 1_000 },
      random: () => 0.5,
    });
    const error = serverError();
    r.behaviour.set("m#0", error);
    await expect(r.router.complete(ask("m"), signal())).rejects.toBe(error);
    expect(r.called("m#1")).toBe(0);
  });

  it("stops at once when the caller goes away, counting nothing against the deployment", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", "hang");
    const caller = new AbortController();
    const call = r.router.complete(ask("m"), caller.signal);
    await vi.waitFor(() => expect(r.called("m#0")).toBe(1));
    caller.abort(new Error("client gone"));
    await expect(call).rejects.toThrow("client gone");
    expect(r.called("m#1")).toBe(0);
    expect(r.events).toEqual([]);
  });
});

describe("routing a stream", () => {
  const read = async (stream: AsyncGenerator<string | ToolCallDelta, Completion>) => {
    const pieces: (string | ToolCallDelta)[] = [];
    for (;;) {
      const step = await stream.next();
      if (step.done) return { pieces, completion: step.value };
      pieces.push(step.value);
    }
  };

  it("retries a stream that failed before its first piece, and names the deployment before it", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", serverError());
    const seen: StreamSeen = {};
    const stream = r.router.stream(ask("m"), signal(), seen);
    const first = await stream.next();
    expect(first.value).toBe("from m#1");
    expect(seen.servedBy?.deployment).toBe("m#1");
    expect((await read(stream)).completion.servedBy?.deployment).toBe("m#1");
  });

  it("lets go of the deployment's stream when its reader stops reading after a piece", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", { pieces: ["one", "two", "three"] });
    const stream = r.router.stream(ask("m"), signal());
    expect((await stream.next()).value).toBe("one");
    expect(r.closed).toEqual([]);
    await stream.return(undefined as never);
    expect(r.closed).toEqual(["m#0"]);
  });

  it("never retries a stream that broke after its first piece reached the reader, but counts it against the deployment", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    const broke = new ProviderFailed("it reported an error during the stream");
    r.behaviour.set("m#0", { pieces: ["Echo"], thenFail: broke });
    const stream = r.router.stream(ask("m"), signal());
    expect((await stream.next()).value).toBe("Echo");
    await expect(stream.next()).rejects.toBe(broke);
    expect(r.called("m#1")).toBe(0);
    expect(r.events).toEqual(["failed m#0"]);
  });
});

describe("cooldowns as the router sees them", () => {
  it("leaves cooling deployments alone; with every one cooling, 503 with when the first is back", async () => {
    const memory = memoryCooldowns({ "m#0": { kind: "cooling", remainingMs: 4_200 } });
    const r = router([model("m", [{}, { priority: 1 }])], { cooldowns: memory.cooldowns });
    expect((await r.router.complete(ask("m"), signal())).servedBy?.deployment).toBe("m#1");
    expect(r.called("m#0")).toBe(0);

    const both = memoryCooldowns({
      "m#0": { kind: "cooling", remainingMs: 4_200 },
      "m#1": { kind: "cooling", remainingMs: 9_000 },
    });
    const cold = router([model("m", [{}, { priority: 1 }])], { cooldowns: both.cooldowns });
    const refused = await cold.router.complete(ask("m"), signal()).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      status: 503,
      reason: "model_unavailable",
      headers: { "Retry-After": "5" },
    });
    expect(cold.calls).toEqual([]);
  });

  it("sends one probe to a deployment on probation, and ends its probation when it answers", async () => {
    const memory = memoryCooldowns({ "m#0": { kind: "probation" } });
    memory.claimable.add("m#0");
    const r = router([model("m", [{}, { priority: 1 }])], { cooldowns: memory.cooldowns });
    expect((await r.router.complete(ask("m"), signal())).servedBy?.deployment).toBe("m#0");
    expect(memory.events).toEqual(["claim m#0", "recovered m#0"]);
  });

  it("goes elsewhere while another call holds the probe, and cools a failed probe down at once", async () => {
    const memory = memoryCooldowns({ "m#0": { kind: "probation" } });
    const r = router([model("m", [{}, { priority: 1 }])], { cooldowns: memory.cooldowns });
    expect((await r.router.complete(ask("m"), signal())).servedBy?.deployment).toBe("m#1");
    expect(r.called("m#0")).toBe(0);

    memory.claimable.add("m#0");
    memory.events.length = 0;
    r.behaviour.set("m#0", serverError());
    expect((await r.router.complete(ask("m"), signal())).servedBy?.deployment).toBe("m#1");
    expect(memory.events).toEqual(["claim m#0", `failed m#0 cool ${DEFAULT_ROUTING.cooldown.coolMs}`]);
  });

  it("cools a deployment down at once for its provider's Retry-After, up to the cap", async () => {
    const r = router([model("m", [{}, { priority: 1 }])]);
    r.behaviour.set("m#0", new ProviderRateLimited("3", ""));
    await r.router.complete(ask("m"), signal());
    r.behaviour.set("m#0", new ProviderRateLimited("3600", ""));
    await r.router.complete(ask("m"), signal());
    expect(r.events).toEqual(["failed m#0 cool 3000", "failed m#0 cool 5000"]);
  });

  it("never cools the one deployment of a model without fallbacks: there is nowhere else to go", async () => {
    const r = router([model("m", [{}])]);
    const error = serverError();
    r.behaviour.set("m#0", error);
    await expect(r.router.complete(ask("m"), signal())).rejects.toBe(error);
    expect(r.events).toEqual([]);
  });
});
