import { mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newVaultKeys } from "@gw/core/mcp";
import { PERMISSIONS } from "@gw/core/permissions";
import { type BareRepositories, bareRepositories } from "@gw/test-kit/git-remote";
import { type FakeMcpServer, startFakeMcpServer, startRelay } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answerProblem,
  type Fixtures,
  type FuzzRequest,
  type OpenApiDocument,
  operationsOf,
  RequestFuzzer,
} from "./openapi-fuzz.ts";
import { useStack } from "./stack.ts";

/**
 * Every operation of the OpenAPI document the gateway serves, sent odd
 * requests generated from a fixed seed (path parameters, query values,
 * bodies, `X-On-Behalf-Of` and other headers), with a key holding every
 * permission, against the whole stack. No answer may be a 5xx, and every
 * error must be the catalogue's JSON. Writes run first, then reads, then
 * deletes, so reads meet what odd writes left (an audit record of a tool
 * name holding U+0000 once made the audit trail's filters answer 500).
 * `FUZZ_SEED=<n>` replays or varies a run; a failure prints its seed.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 1);
/** Requests per operation: 74 operations make about 2,200. `FUZZ_PER_OPERATION` asks for a longer run by hand. */
const PER_OPERATION = Number(process.env.FUZZ_PER_OPERATION ?? 30);
const IN_FLIGHT = 6;
/**
 * 5xx that are an upstream's own answer, which the operation documents: a
 * clone or push of a repository the local git remote does not hold.
 */
const UPSTREAM_ANSWERS: Record<string, string[]> = {
  createSandboxSession: ["remote_failed"],
  pushSandboxSession: ["remote_failed"],
};

const remotesDir = mkdtempSync(join(tmpdir(), "gw-fuzz-remotes-"));
const sandboxRoot = mkdtempSync(join(tmpdir(), "gw-fuzz-sandbox-"));
const sandboxGitDir = mkdtempSync(join(tmpdir(), "gw-fuzz-sandbox-git-"));
let relay: Awaited<ReturnType<typeof startRelay>>;
const serviceEnv: Record<string, string> = {
  GATEWAY_PUBLIC_URL: "https://gateway.test",
  GIT_BASE_URL: `file://${remotesDir}`,
  SANDBOX_ROOT: sandboxRoot,
  SANDBOX_GIT_DIR: sandboxGitDir,
  // Schedules the fuzzer creates never fire while it runs.
  EVAL_MIN_INTERVAL_SECONDS: "60",
};
beforeAll(async () => {
  relay = await startRelay();
  serviceEnv.GATEWAY_URL = relay.url;
});
afterAll(async () => {
  await relay?.close();
  await Promise.all(
    [remotesDir, sandboxRoot, sandboxGitDir].map((dir) => rm(dir, { recursive: true, force: true })),
  );
});

const stack = useStack(serviceEnv, { MCP_ALLOW_PRIVATE_UPSTREAMS: "true", VAULT_KEYS: newVaultKeys() });
let upstream: FakeMcpServer;
let remotes: BareRepositories;
beforeAll(async () => {
  relay.target = stack.gatewayUrl;
  [upstream, remotes] = await Promise.all([startFakeMcpServer(), bareRepositories(remotesDir)]);
  await remotes.create("acme", "app");
});
afterAll(() => Promise.all([upstream?.close(), remotes?.remove()]));

/** A request through the gateway with the fuzzer's key; answers a status, a type and the text. */
async function send(secret: string, request: FuzzRequest) {
  const res = await fetch(`${stack.gatewayUrl}${request.target}`, {
    method: request.method,
    headers: { authorization: `Bearer ${secret}`, ...request.headers },
    body: request.body,
    redirect: "manual",
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
}

/** Real resources of the fuzzer's organization, made through the API, so generated requests reach past lookups. */
async function fixtures(secret: string): Promise<Fixtures> {
  const post = async (path: string, json: unknown, method = "POST") => {
    const res = await stack.call(secret, path, { method, json });
    expect(res.status, `${method} ${path}`).toBeLessThan(300);
    return res.status === 204 ? {} : ((await res.json()) as Record<string, unknown>);
  };
  const conversation = await post("/api/v1/llm/conversations", { items: [{ role: "user", content: "hi" }] });
  const items = (
    await (await stack.call(secret, `/api/v1/llm/conversations/${conversation.id}/items`)).json()
  ).data as { id: string }[];
  const response = await post("/api/v1/llm/responses", { model: "echo-small", input: "hi" });
  const completion = await post("/api/v1/llm/chat/completions", {
    model: "echo-small",
    messages: [{ role: "user", content: "hi" }],
    store: true,
  });
  const server = await post("/api/v1/mcp/servers", { name: "docs", url: upstream.url });
  // The fake upstream's `slow` answers only when released: a hosted MCP turn would wait on it.
  await post(`/api/v1/mcp/servers/${server.id}/tools/slow`, { disabled: true }, "PUT");
  const schedule = await post("/api/v1/llm/evals/schedules", {
    name: "fuzz",
    inputs: ["hi"],
    every_seconds: 3600,
  });
  await post("/api/v1/sandbox/connections/github", { token: "ghp_fuzz" }, "PUT");
  const session = await post("/api/v1/sandbox/sessions", {
    owner: "acme",
    repository: "app",
    repository_id: 1,
  });
  const victim = await stack.createKey({ org: (await whoami(secret)).org, owner: "victim" });
  const proxyUrl = `https://gateway.test/api/v1/mcp/servers/${server.id}/mcp`;
  const ids = {
    conversation: String(conversation.id),
    item: items[0]!.id,
    response: String(response.id),
    completion: String(completion.id),
    server: String(server.id),
    schedule: String(schedule.id),
    session: String(session.id),
  };
  return {
    pathParams: {
      "conversations/{id}": ids.conversation,
      "items/{itemId}": ids.item,
      "responses/{id}": ids.response,
      "completions/{id}": ids.completion,
      "servers/{id}": ids.server,
      "schedules/{schedule_id}": ids.schedule,
      "sessions/{id}": ids.session,
      "sessions/{session_id}": ids.session,
      "api-keys/{id}": victim.id,
      "models/{id}": "echo-small",
      "{resourceType}": "conversation",
      "{resourceId}": ids.conversation,
      "{userId}": "alice",
      "{tool_name}": "search",
      "{scope}": "me",
    },
    fields: {
      resourceType: "conversation",
      resourceId: ids.conversation,
      userId: "bob",
      actor: "backend",
      model: "echo-small",
      previous_response_id: ids.response,
      conversation: ids.conversation,
      server_url: proxyUrl,
      server_label: "docs",
      url: upstream.url,
      owner: "acme",
      repository: "app",
      repository_id: 1,
      branch: "fuzz",
      assignment_generation: 1,
      input: "hi",
      content: "hi",
      inputs: ["hi"],
      every_seconds: 3600,
      token: "ghp_fuzz",
      externalUserId: "alice",
    },
    seeds: {
      mcpProxy: [
        { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18" } },
        { jsonrpc: "2.0", id: 2, method: "tools/list" },
        {
          jsonrpc: "2.0",
          id: 3,
          method: "tools/call",
          params: { name: "search", arguments: { query: "x" } },
        },
        { jsonrpc: "2.0", id: 4, method: "ping" },
      ],
      createResponse: [
        { model: "echo-small", input: "hi" },
        { model: "echo-small", input: "hi", previous_response_id: ids.response, store: false },
        {
          model: "echo-small",
          input: [{ type: "item_reference", id: ids.item }],
          conversation: ids.conversation,
        },
        {
          model: "echo-small",
          input: "hi",
          tools: [{ type: "mcp", server_label: "docs", server_url: proxyUrl, require_approval: "never" }],
        },
      ],
      countInputTokens: [{ model: "echo-small", input: "hi", previous_response_id: ids.response }],
      createChatCompletion: [
        { model: "echo-small", messages: [{ role: "user", content: "hi" }] },
        { model: "echo-small", messages: [{ role: "user", content: "hi" }], stream: true, store: true },
      ],
      pushSandboxSession: [{ assignment_generation: 1, branch: "fuzz", checkout_path: "" }],
    },
  };
}

async function whoami(secret: string): Promise<{ org: string }> {
  return (await (await stack.call(secret, "/api/v1/authentication/whoami")).json()) as { org: string };
}

/** Runs `requests` `IN_FLIGHT` at a time; answers each request's problem, if any. */
async function runAll(secret: string, requests: FuzzRequest[]): Promise<string[]> {
  const problems: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const request = requests[next++]!;
      let problem: string | undefined;
      try {
        const answer = await send(secret, request);
        problem = answerProblem(answer, {
          jsonRpc: request.operationId === "mcpProxy",
          upstreamAnswers: UPSTREAM_ANSWERS[request.operationId] ?? [],
        });
      } catch (err) {
        problem = `no answer: ${(err as Error).message}`;
      }
      if (problem)
        problems.push(
          `${request.operationId}: ${request.method} ${request.target.slice(0, 300)}` +
            `${Object.keys(request.headers).length ? ` headers=${JSON.stringify(request.headers)}` : ""}` +
            `${request.body !== undefined ? ` body=${request.body.slice(0, 300)}` : ""}\n  → ${problem}`,
        );
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return problems;
}

describe("odd requests to every operation of the OpenAPI document", () => {
  it(`answer no 5xx, and every error in the catalogue's JSON (seed ${SEED})`, {
    timeout: Math.max(120_000, PER_OPERATION * 1_000),
  }, async () => {
    const { secret } = await stack.createKey({ owner: "backend", permissions: [...PERMISSIONS] });
    const document = (await (
      await fetch(`${stack.gatewayUrl}/api/v1/openapi.json`)
    ).json()) as OpenApiDocument;
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThan(70);
    const fuzzer = new RequestFuzzer(document, SEED, await fixtures(secret));
    const phase = (method: string) =>
      ["POST", "PUT", "PATCH"].includes(method) ? 0 : method === "GET" ? 1 : 2;
    const problems: string[] = [];
    let sent = 0;
    for (const current of [0, 1, 2]) {
      const requests = operations
        .filter((operation) => phase(operation.method) === current)
        .flatMap((operation) => fuzzer.requests(operation, PER_OPERATION));
      sent += requests.length;
      problems.push(...(await runAll(secret, requests)));
    }
    expect(sent).toBe(operations.length * PER_OPERATION);
    expect(
      problems,
      `seed ${SEED} (FUZZ_SEED=${SEED} FUZZ_PER_OPERATION=${PER_OPERATION} pnpm exec vitest run packages/service/test/openapi-fuzz.test.ts): ${problems.length} of ${sent} requests\n${problems.slice(0, 40).join("\n")}`,
    ).toEqual([]);
  });
});
