import { randomUUID } from "node:crypto";
import { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import { monitorCommands } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useStack } from "../../test/stack.ts";

const stack = useStack();
const CHAT = "/api/v1/llm/chat/completions";

const principalOf = (org: string): Principal => ({
  org,
  user: "alice",
  keyId: "key_door",
  permissions: ["responses:write", "responses:read", "conversations:write"],
  credential: "api_key",
  onBehalfOf: false,
});

/** An assertion as the gateway signs it for one request. */
async function assert(principal: Principal, path: string) {
  const requestId = randomUUID();
  const assertion = await new InternalAssertions(stack.assertionSecret).sign(
    principal,
    { method: "POST", path, requestId },
    { limits: {} },
  );
  return { requestId, assertion };
}

/** The request the assertion was made for (sent twice: a replay). */
function sendAs(
  path: string,
  body: unknown,
  { requestId, assertion }: { requestId: string; assertion: string },
) {
  return fetch(`${stack.serviceUrl}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-request-id": requestId,
      "x-gateway-assertion": assertion,
    },
    body: JSON.stringify(body),
  });
}

const send = async (principal: Principal, path: string, body: unknown) =>
  sendAs(path, body, await assert(principal, path));

/** Every write held in Redis while `during` runs: the replay guard's SET waits, reads pass. */
async function whileWritesHeld<T>(during: () => Promise<T>): Promise<T> {
  const pauser = createRedis(stack.redisUrl, { connectionName: "test-pause" });
  await pauser.call("CLIENT", "PAUSE", "60000", "WRITE");
  try {
    return await during();
  } finally {
    await pauser.call("CLIENT", "UNPAUSE");
    pauser.disconnect();
  }
}

describe("a model call's replay guard, answered while its body is read", () => {
  it("validates the body before Redis has answered: a bad body is a 422 while the guard's SET is held", async () => {
    const principal = principalOf(`org-${randomUUID()}`);
    const res = await whileWritesHeld(() =>
      send(principal, CHAT, { model: "gpt-test", messages: "not a list" }),
    );
    expect(res.status).toBe(422);
  });

  it("runs nothing of a replay: the same assertion twice is one model call, then a 401", async () => {
    const principal = principalOf(`org-${randomUUID()}`);
    const sent = await assert(principal, CHAT);
    const body = { model: "gpt-test", messages: [{ role: "user", content: `replayed ${sent.requestId}` }] };
    const asked = () =>
      stack.llm.requests.filter((r) => JSON.stringify(r.body).includes(sent.requestId)).length;
    expect((await sendAs(CHAT, body, sent)).status).toBe(200);
    const replay = await sendAs(CHAT, body, sent);
    expect(replay.status).toBe(401);
    expect((await replay.json()).error.message).toMatch(/already used/);
    expect(asked()).toBe(1);
  });
});

describe("reads sent beside the replay guard", () => {
  it("a chat completion's guardrail version is read while its assertion's id is still held in Redis (one round trip); an embedding and a conversation read none", async () => {
    const org = `org-${randomUUID()}`;
    const principal = principalOf(org);
    const versionKey = `gw:guardrails:${org}:version`;
    const monitor = await monitorCommands(stack.redisServer);
    let answer: Promise<Response> | undefined;
    await whileWritesHeld(async () => {
      answer = send(principal, CHAT, { model: "gpt-test", messages: [{ role: "user", content: "hello" }] });
      await expect
        .poll(() => monitor.commands.some(([name, key]) => name === "get" && key === versionKey), {
          timeout: 5_000,
        })
        .toBe(true);
    });
    expect((await answer!).status).toBe(200);
    expect((await send(principal, "/api/v1/llm/conversations", {})).status).toBe(200);
    const embedding = await send(principal, "/api/v1/llm/embeddings", {
      model: "text-embedding-3-small",
      input: "hi",
    });
    expect(embedding.status).toBe(200);
    await monitor.stop();
    const versionReads = monitor.commands.filter(([name, key]) => name === "get" && key === versionKey);
    expect(versionReads).toHaveLength(1);
  });
});
