import { randomBytes } from "node:crypto";
import type { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import {
  readRelationshipLines,
  spicedbEnv,
  startTestPostgres,
  startTestRedis,
  startTestSpiceDB,
  type TestPostgres,
  type TestRedis,
} from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../src/server.ts";
import { expectStoreUnavailable, sendAsGateway, startLoggedService } from "./as-gateway.ts";

let logs: string[];
let postgres: TestPostgres;
let redisServer: TestRedis;
let spicedb: Awaited<ReturnType<typeof startTestSpiceDB>>;
let service: RunningService;
let assertions: InternalAssertions;
let llm: FakeLLM;

const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_pg_outage",
  permissions: ["conversations:read", "conversations:write", "responses:read", "responses:write"],
  credential: "api_key",
  onBehalfOf: false,
};

beforeAll(async () => {
  // A PostgreSQL of this file's own, with a password in its URL, so the test can stop it and tell the password never reaches a log.
  [postgres, redisServer, spicedb] = await Promise.all([
    startTestPostgres(),
    startTestRedis(),
    startTestSpiceDB(),
  ]);
  llm = await startFakeLLM();
  ({ service, assertions, logs } = await startLoggedService({
    REDIS_URL: redisServer.url,
    DATABASE_URL: postgres.url.replace("gateway@", `gateway:${PASSWORD}@`),
    ...spicedbEnv(spicedb),
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
  }));
});
afterAll(async () => {
  await service?.close();
  await Promise.all([postgres?.stop(), redisServer?.stop(), spicedb?.close(), llm?.close()]);
});

/** Trust authentication ignores it; it only has to stay out of the logs. */
const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;

const send = (method: string, path: string, body?: unknown) =>
  sendAsGateway(service.url, assertions, principal, method, path, body);
const expectUnavailable = expectStoreUnavailable;

const CONV = "/api/v1/llm/conversations";
const COMPLETIONS = "/api/v1/llm/chat/completions";

const message = (text: string) => ({ role: "user", content: text });

describe("the service while PostgreSQL is down", () => {
  it("answers 503 JSON, keeps everything it acknowledged, says not ready, and recovers by itself", async () => {
    const acknowledged: { id: string; texts: string[] }[] = [];
    for (const texts of [["a1"], ["b1", "b2"]]) {
      const created = await send("POST", CONV, { items: texts.map(message) });
      expect(created.status).toBe(200);
      acknowledged.push({ id: (await created.json()).id, texts });
    }
    const added = await send("POST", `${CONV}/${acknowledged[1]!.id}/items`, { items: [message("b3")] });
    expect(added.status).toBe(200);
    acknowledged[1]!.texts.push("b3");
    const storedCompletion = await send("POST", COMPLETIONS, { messages: [message("kept")], store: true });
    expect(storedCompletion.status).toBe(200);
    const completionId = (await storedCompletion.json()).id as string;

    await postgres.halt();
    await expectUnavailable(await send("GET", `${CONV}/${acknowledged[0]!.id}`));
    await expectUnavailable(await send("GET", `${CONV}/${acknowledged[0]!.id}/items`));
    // A conversation that could not be stored keeps no owner relationship: nobody finds its id in lookups.
    const conversationsBefore = await readRelationshipLines(spicedb, {
      resourceType: "conversation",
      optionalResourceIdPrefix: `${principal.org}/`,
    });
    await expectUnavailable(await send("POST", CONV, { items: [message("lost?")] }));
    await expectUnavailable(await send("POST", CONV, {}));
    expect(
      await readRelationshipLines(spicedb, {
        resourceType: "conversation",
        optionalResourceIdPrefix: `${principal.org}/`,
      }),
    ).toEqual(conversationsBefore);
    await expectUnavailable(
      await send("POST", `${CONV}/${acknowledged[1]!.id}/items`, { items: [message("b4")] }),
    );
    // The response could not be stored: 503, and its id keeps no owner relationship. Its ownership is written
    // beside the model call and fails once PostgreSQL refuses to record when the owner's grant ends, which aborts
    // the call: the model may or may not have been asked by then, never more than once.
    const asked = llm.requests.length;
    await expectUnavailable(await send("POST", "/api/v1/llm/responses", { input: "unstored" }));
    expect(llm.requests.length).toBeLessThanOrEqual(asked + 1);
    const askedAfterResponse = llm.requests.length;
    expect(
      await readRelationshipLines(spicedb, {
        resourceType: "response",
        optionalResourceIdPrefix: `${principal.org}/`,
      }),
    ).toEqual([]);
    // The same for a stored chat completion; one stored before stays out of reach, not lost.
    await expectUnavailable(
      await send("POST", COMPLETIONS, { messages: [message("unstored")], store: true }),
    );
    expect(llm.requests.length).toBeLessThanOrEqual(askedAfterResponse + 1);
    expect(
      await readRelationshipLines(spicedb, {
        resourceType: "completion",
        optionalResourceIdPrefix: `${principal.org}/`,
      }),
    ).toEqual([`organization ${principal.org}`, `owner ${principal.org}/${principal.user}`]); // the one stored before, only
    await expectUnavailable(await send("GET", `${COMPLETIONS}/${completionId}`));
    const ready = await fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(503);
    expect((await ready.json()).checks.postgres).toBe("unreachable");

    await postgres.restart();
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await send("GET", `${CONV}/${acknowledged[0]!.id}`)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(200);
    for (const { id, texts } of acknowledged) {
      const items = await send("GET", `${CONV}/${id}/items?order=asc`);
      expect(items.status).toBe(200);
      const listed = (await items.json()).data.map(
        (i: { content: { text: string }[] }) => i.content[0]!.text,
      );
      expect(listed).toEqual(texts);
    }
    expect((await send("POST", CONV, {})).status).toBe(200);
    const completion = await send("GET", `${COMPLETIONS}/${completionId}/messages`);
    expect((await completion.json()).data.map((m: { content: string }) => m.content)).toEqual(["kept"]);

    const text = logs.join("");
    expect(text).toContain("The data store is unavailable");
    expect(text).not.toContain("unhandled error");
    expect(text).not.toContain(PASSWORD);
  });
});
