import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { createLogger, createRedis, InternalAssertions, loadConfig, type Principal } from "@gw/core";
import {
  spicedbEnv,
  startTestRedis,
  startTestSpiceDB,
  type TestRedis,
  useTestDatabase,
} from "@gw/devstack/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { type RunningService, startService } from "../src/server.ts";

const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;
const logs: string[] = [];
let redisServer: TestRedis;
let spicedb: Awaited<ReturnType<typeof startTestSpiceDB>>;
let service: RunningService;
let assertions: InternalAssertions;
const database = useTestDatabase();
// Never the repository's .data, which a `pnpm start` on this machine may be using.
const dataDir = mkdtempSync(join(tmpdir(), "gw-outage-data-"));

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
  const secret = randomBytes(32).toString("hex");
  assertions = new InternalAssertions(secret);
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  service = await startService(
    loadConfig(serviceConfigSchema, {
      PORT: "0",
      REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redisServer.port}`,
      DATABASE_URL: database.url,
      INTERNAL_ASSERTION_SECRET: secret,
      DATA_DIR: dataDir,
      ...spicedbEnv(spicedb),
    }),
    createLogger("service", "info", sink),
  );
});
afterAll(async () => {
  await service?.close();
  await Promise.all([redisServer?.stop(), spicedb?.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

/** A request as the gateway would forward it, with a fresh assertion. */
async function send(method: string, path: string, body?: unknown) {
  const requestId = randomUUID();
  const assertion = await assertions.sign(principal, { method, path, requestId });
  return fetch(`${service.url}${path}`, {
    method,
    headers: {
      "x-gateway-assertion": assertion,
      "x-request-id": requestId,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function expectUnavailable(res: Response) {
  expect(res.status).toBe(503);
  expect(await res.json()).toEqual({
    error: "Service Unavailable",
    message: "The data store is unavailable; try again",
  });
}

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
