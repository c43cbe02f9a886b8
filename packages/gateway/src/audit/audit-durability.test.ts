import { AuditLog } from "@gw/core/audit";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { capturingLogger, startTestPostgres, type TestPostgres } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg } from "../../test/authorization-helpers.ts";
import { useGateway } from "../../test/harness.ts";
import { createGatewayMetrics } from "../metrics.ts";
import { audited } from "./audited.ts";

const UNAVAILABLE = {
  error: "Service Unavailable",
  message: "The data store is unavailable; try again",
  code: "data_store_unavailable",
};

// The gateway's own PostgreSQL server, so stopping it touches no other test file.
let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startTestPostgres();
});
afterAll(async () => {
  await postgres?.stop();
});
const gw = useGateway({}, () => ({ DATABASE_URL: postgres.url }));

describe("no role change without its audit record", () => {
  it("PostgreSQL stopped: register, grant, revoke and delete answer 503 JSON and change nothing; once it is back they are made and recorded", async () => {
    const o = await newOrg(gw);
    const file = { resourceType: "file", resourceId: "f_durable" };
    expect((await o.register("alice", "file", "f_durable")).status).toBe(201);
    expect((await o.grant("alice", { ...file, userId: "carol", role: "reader" })).status).toBe(204);

    await postgres.halt();
    const refused = [
      await o.grant("alice", { ...file, userId: "bob", role: "writer" }),
      await o.revoke("alice", { ...file, userId: "carol", role: "reader" }),
      await o.register("alice", "file", "f_other"),
      await o.deleteResource("alice", "file", "f_durable"),
    ];
    for (const res of refused) {
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await res.json()).toEqual(UNAVAILABLE);
    }
    // Nothing of them reached SpiceDB (checks do not need PostgreSQL).
    expect(await o.check("bob", "file", "f_durable", "writer")).toBe(false);
    expect(await o.check("carol", "file", "f_durable", "reader")).toBe(true);
    expect(await o.check("alice", "file", "f_other", "owner")).toBe(false);
    expect(await o.check("alice", "file", "f_durable", "owner")).toBe(true);

    await postgres.restart();
    expect((await o.grant("alice", { ...file, userId: "bob", role: "writer" })).status).toBe(204);
    expect(await o.check("bob", "file", "f_durable", "writer")).toBe(true);
    const { data } = await (await o.audit("alice", "file", "f_durable")).json();
    expect(
      data.map((r: { action: string; subject?: string; outcome: string }) => [
        r.action,
        r.subject,
        r.outcome,
      ]),
    ).toEqual([
      ["grant", "bob", "allowed"],
      ["grant", "carol", "allowed"],
      ["register", undefined, "allowed"],
    ]);
  });

  it("PostgreSQL lost after the change landed: the change stands, and its record, written before, says 'unknown'", async () => {
    const db: Postgres = createPostgres(postgres.url, { connectionName: "test", connectTimeoutMs: 500 });
    const { logger, lines } = capturingLogger("info");
    const metrics = createGatewayMetrics();
    const audit = new AuditLog(db, { retentionMs: 86_400_000, logger });
    const principal = { org: "org-lost", user: "alice", keyId: "key_1", credential: "api_key" } as Principal;
    const resource = { type: "file" as const, id: "f_lost" };
    try {
      let ran = false;
      // The change "lands" (returns its ZedToken), and PostgreSQL goes away before its outcome is written.
      await audited(
        { audit, metrics, logger },
        { principal, requestId: "req-lost" },
        { action: "grant", resource, subject: "bob", role: "reader" },
        async () => {
          ran = true;
          await postgres.halt();
          return "zed-token-of-the-write";
        },
      );
      expect(ran).toBe(true);
      expect((await metrics.auditWriteErrors.get()).values[0]?.value).toBe(1);
      expect(lines.join("")).toMatch(/could not record the outcome of an audited change/);

      await postgres.restart();
      const { data } = await audit.forResource("org-lost", resource, { limit: 10 });
      expect(data).toEqual([
        expect.objectContaining({
          action: "grant",
          subject: "bob",
          role: "reader",
          outcome: "unknown",
          requestId: "req-lost",
          actor: { userId: "alice", keyId: "key_1", credential: "api_key" },
        }),
      ]);
    } finally {
      await postgres.restart();
      await db.close();
    }
  });
});
