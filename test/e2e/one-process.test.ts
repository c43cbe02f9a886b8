import { commandLine } from "@gw/devstack";
import { survivors } from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openaiPythonCases } from "./openai-python.ts";
import {
  keys,
  newDataDir,
  type RunningStack,
  removeDataDir,
  seedPostgres,
  stackEnv,
  stackTarget,
  startStack,
  workerVectors,
} from "./pnpm-start.ts";

/** `SERVICE_IN_GATEWAY=true pnpm start`: the gateway with the service in its process (docs/adr/0026-service-in-the-gateways-process.md). */
describe("SERVICE_IN_GATEWAY=true pnpm start", () => {
  let stack: RunningStack;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let llm: FakeLLM;
  const output = () => stack.output();
  const pids = () => [...output().matchAll(/"pid":(\d+)/g)].map((m) => Number(m[1]));

  beforeAll(async () => {
    dataDir = await newDataDir("gw-one-process-");
    llm = await startFakeLLM();
    await seedPostgres(dataDir);
    env = await stackEnv(dataDir, {
      LLM_BASE_URL: llm.baseUrl,
      LLM_DEFAULT_MODEL: "echo-small",
      SERVICE_IN_GATEWAY: "true",
      ...(await workerVectors()),
    });
    stack = await startStack(env);
    await vi.waitFor(() => expect(output()).toContain("stack is ready"), { timeout: 30_000, interval: 50 });
  }, 150_000);

  afterAll(async () => {
    await stack?.interrupt();
    await removeDataDir(dataDir);
    await llm?.close();
  });

  it("runs one process for gateway and service; the service's own port answers its probes and its metrics", async () => {
    expect(output()).toContain("gateway with the service in its process started");
    const commands = pids().map((pid) => commandLine(pid) ?? "");
    expect(commands.some((c) => c.includes("packages/gateway-with-service/src/main.ts"))).toBe(true);
    expect(commands.some((c) => c.includes("packages/service/src/main.ts"))).toBe(false);
    expect(commands.some((c) => c.includes("packages/gateway/src/main.ts"))).toBe(false);
    const { stdout } = await keys(env, ["create", "--org", "one", "--owner", "ops"]);
    const res = await fetch(`${stack.gatewayUrl}/api/v1/llm/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${JSON.parse(stdout).key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "echo-small", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    const service = `http://127.0.0.1:${env.SERVICE_PORT}`;
    expect((await fetch(`${service}/readyz`)).status).toBe(200);
    // The service's registry on its own port, with the call it made.
    expect(await (await fetch(`${service}/metrics`)).text()).toMatch(
      /^service_llm_requests_total\{[^}]*\} 1$/m,
    );
  });

  describe("openai-python against it", () => {
    const target = stackTarget(() => ({ env, gatewayUrl: stack.gatewayUrl, llm }));
    // The official SDK's and the other libraries' cases run through the mounted service in
    // openai-sdk.test.ts; here, the one process as `pnpm start` runs it, with openai-python.
    openaiPythonCases(target);
  });

  it("stops every process it started on Ctrl-C", async () => {
    const started = pids();
    expect(started.length).toBeGreaterThanOrEqual(4);
    await stack.interrupt();
    expect(await survivors(started, 15_000)).toEqual([]);
    expect(output()).not.toContain("a stack process exited");
  });
});
