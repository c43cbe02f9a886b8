import { systemClock } from "@gw/core/clock";
import { parseDuration } from "@gw/core/duration";
import { errorHandler, jsonBody, listen } from "@gw/core/http";
import { createLogger } from "@gw/core/logger";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { RedisUnavailable } from "@gw/core/redis";
import { useTestDatabase } from "@gw/test-kit";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatProvider } from "../../llm/provider.ts";
import type { Evals } from "../index.ts";
import type { EvalQueue } from "../queue.ts";
import { EvalStore } from "../store.ts";
import { createSchedule } from "./create-schedule.ts";

const database = useTestDatabase();
let db: Postgres;
let url: string;
let close: () => Promise<void>;

const principal: Principal = {
  org: "acme",
  user: "alice",
  keyId: "key_compensation",
  permissions: ["evals:write"],
  credential: "api_key",
  onBehalfOf: false,
};

beforeAll(async () => {
  db = createPostgres(database.url, { connectionName: "compensation-test" });
  const store = new EvalStore(db, {
    runRetentionMs: parseDuration("90d")!,
    runsPerSchedule: 10,
    clock: systemClock,
  });
  // The queue fails as an unreachable Redis does, after the row was written.
  const queue = {
    schedule: () => Promise.reject(new RedisUnavailable(new Error("connection refused"))),
  } as unknown as EvalQueue;
  const evals = {
    store,
    queue,
    limits: { maxSchedulesPerOrg: 10, minIntervalSeconds: 1 },
    clock: systemClock,
  } as unknown as Evals;
  const app = express();
  app.use(jsonBody);
  app.use((_req, res, next) => {
    res.locals.principal = principal;
    next();
  });
  const router = express.Router();
  createSchedule.register(router, {
    evals,
    provider: { resolveModel: () => "m" } as unknown as ChatProvider,
  });
  app.use("/api/v1", router);
  app.use(errorHandler(createLogger("compensation-test", "silent")));
  const { server, port } = await listen(app, 0, "127.0.0.1");
  url = `http://127.0.0.1:${port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
afterAll(async () => {
  await close?.();
  await db?.close();
});

describe("a create whose second write fails leaves nothing of the first", () => {
  it("an eval schedule whose job scheduler cannot be written: 503, and no schedule row remains", async () => {
    const res = await fetch(`${url}/api/v1/llm/evals/schedules`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "never scheduled", inputs: ["x"], every_seconds: 60 }),
    });
    expect(res.status).toBe(503);
    const { rows } = await db.query<{ n: string }>(
      "SELECT count(*) AS n FROM eval_schedules WHERE org = $1",
      [principal.org],
    );
    expect(Number(rows[0]!.n)).toBe(0);
  });
});
