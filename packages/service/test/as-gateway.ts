import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { loadConfig } from "@gw/core/config";
import { InternalAssertions } from "@gw/core/internal-assertion";
import { createLogger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import { UNHURRIED_SPICEDB_DEADLINE_MS } from "@gw/test-kit";
import { expect } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { type RunningService, startService } from "../src/server.ts";
import { llmError } from "./stack.ts";

/** A request to the service as the gateway would forward it for `principal`, with a fresh assertion. */
export async function sendAsGateway(
  serviceUrl: string,
  assertions: InternalAssertions,
  principal: Principal,
  method: string,
  path: string,
  body?: unknown,
): Promise<Response> {
  const requestId = randomUUID();
  const assertion = await assertions.sign(principal, { method, path, requestId });
  return fetch(`${serviceUrl}${path}`, {
    method,
    headers: {
      "x-gateway-assertion": assertion,
      "x-request-id": requestId,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** The catalogue's 503 for a data store (Redis or PostgreSQL) that cannot answer, as JSON (the `/api/v1/llm` shape). */
export async function expectStoreUnavailable(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  expect(await res.json()).toEqual(
    llmError("service_unavailable", "The data store is unavailable; try again"),
  );
}

/**
 * The service alone, as its own process would run it with `env` (plus a
 * fresh assertion secret and a temporary DATA_DIR, removed on close), its
 * log lines (at info) kept in `logs`: for tests that call it as the gateway
 * would while its stores fail.
 */
export async function startLoggedService(
  env: Record<string, string>,
): Promise<{ service: RunningService; assertions: InternalAssertions; logs: string[] }> {
  const secret = randomBytes(32).toString("hex");
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  // Never the repository's .data, which a `pnpm start` on this machine may be using.
  const dataDir = await mkdtemp(join(tmpdir(), "gw-logged-service-"));
  const service = await startService(
    loadConfig(serviceConfigSchema, {
      PORT: "0",
      INTERNAL_ASSERTION_SECRET: secret,
      DATA_DIR: dataDir,
      // These tests stop one store and assert the 503 that names it: SpiceDB must answer meanwhile.
      SPICEDB_DEADLINE_MS: UNHURRIED_SPICEDB_DEADLINE_MS,
      ...env,
    }),
    createLogger("service", "info", sink),
  ).catch(async (err: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  });
  const close = service.close.bind(service);
  service.close = async () => {
    await close();
    await rm(dataDir, { recursive: true, force: true });
  };
  return { service, assertions: new InternalAssertions(secret), logs };
}
