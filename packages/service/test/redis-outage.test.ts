import { randomBytes } from "node:crypto";
import type { InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import { spicedbEnv, startTestRedis, startTestSpiceDB, type TestRedis, useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../src/server.ts";
import { expectStoreUnavailable, sendAsGateway, startLoggedService } from "./as-gateway.ts";

const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;
let logs: string[];
let redisServer: TestRedis;
let spicedb: Awaited<ReturnType<typeof startTestSpiceDB>>;
let service: RunningService;
let assertions: InternalAssertions;
const database = useTestDatabase();

const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_outage",
  permissions: ["conversations:read", "conversations:write"],
  credential: "api_key",
  onBehalfOf: false,
};

/** Redis with a password, so the test can tell it never reaches a log. */
async function requirePassword(port: number) {
  const admin = createRedis(`redis://127.0.0.1:${port}`, { connectionName: "test-admin" });
  await admin.config("SET", "requirepass", PASSWORD);
  admin.disconnect();
}

beforeAll(async () => {
  [redisServer, spicedb] = await Promise.all([startTestRedis(), startTestSpiceDB()]);
  await requirePassword(redisServer.port);
  ({ service, assertions, logs } = await startLoggedService({
    REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redisServer.port}`,
    DATABASE_URL: database.url,
    ...spicedbEnv(spicedb),
  }));
});
afterAll(async () => {
  await service?.close();
  await Promise.all([redisServer?.stop(), spicedb?.close()]);
});

const send = (method: string, path: string, body?: unknown) =>
  sendAsGateway(service.url, assertions, principal, method, path, body);
const expectUnavailable = expectStoreUnavailable;
describe("the service during a Redis outage", () => {
  it("answers 503 JSON while Redis hangs or is gone, logs no secret, and recovers by itself", async () => {
    const created = await send("POST", "/api/v1/llm/conversations", { metadata: {} });
    expect(created.status).toBe(200);
    const path = `/api/v1/llm/conversations/${(await created.json()).id}`;
    expect((await send("GET", path)).status).toBe(200);

    // Hung: the connection stays up but nothing answers, until the command timeout.
    redisServer.process.kill("SIGSTOP");
    try {
      await expectUnavailable(await send("GET", path));
      await expectUnavailable(await send("POST", "/api/v1/llm/conversations", {}));
    } finally {
      redisServer.process.kill("SIGCONT");
    }
    // Gone: connections refused.
    await redisServer.halt();
    await expectUnavailable(await send("GET", path));
    await expectUnavailable(await send("POST", "/api/v1/llm/conversations", {}));

    await redisServer.restart();
    await requirePassword(redisServer.port);
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await send("POST", "/api/v1/llm/conversations", {})).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(200);

    const text = logs.join("");
    expect(text).toContain("The data store is unavailable");
    expect(text).not.toContain("unhandled error");
    expect(text).not.toContain(PASSWORD);
  });
});
