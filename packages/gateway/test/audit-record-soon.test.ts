import { type AuditIntent, AuditLog } from "@gw/core/audit";
import { createPostgres, type Postgres, type Queryable } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const database = useTestDatabase();
let db: Postgres;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "test" });
});
afterAll(() => db?.close());

const call = (org: string, tool: string): AuditIntent => ({
  organization: org,
  actor: { userId: "alice", keyId: "key_1", credential: "api_key" },
  action: "call",
  resourceType: "mcp_server",
  resourceId: "mcp_1",
  tool,
  decision: "allowed",
  durationMs: 1,
  argumentsSha256: "0".repeat(64),
  requestId: `req-${tool}`,
});

/** `db`, counting the statements that write audit records. */
function counting(): { db: Queryable; inserts: () => number } {
  let inserts = 0;
  return {
    db: {
      query: ((text: string, values?: unknown[]) => {
        if (text.includes("INSERT INTO audit_records")) inserts++;
        return db.query(text, values);
      }) as Queryable["query"],
    },
    inserts: () => inserts,
  };
}

describe("records written soon after the answer (recordSoon)", () => {
  it("writes the records of one turn in one statement, every text kept, and a listing waits for them", async () => {
    const { db: q, inserts } = counting();
    const audit = new AuditLog(q, { retentionMs: 86_400_000 });
    const tools = ["a\u0000b", "a\ud800b", "\"quoted\" {json} 'x' \\ ,", "😀".repeat(300)];
    for (const tool of tools) audit.recordSoon(call("org-soon-1", tool), "allowed");
    expect(inserts()).toBe(0);
    const listed = (await audit.forOrganization("org-soon-1", { limit: 10 }, { action: "call" })).data;
    expect(inserts()).toBe(1);
    expect(listed.map((r) => r.tool).sort()).toEqual([...tools].sort());
    expect(listed.every((r) => r.outcome === "allowed" && r.requestId === `req-${r.tool}`)).toBe(true);
  });

  it("flush waits for every record given, over several batches", async () => {
    const { db: q, inserts } = counting();
    const audit = new AuditLog(q, { retentionMs: 86_400_000 });
    for (let i = 0; i < 1_200; i++) audit.recordSoon(call("org-soon-2", `t${i}`), "allowed");
    await audit.flush();
    expect(inserts()).toBe(3);
    const { rows } = await db.query<{ n: string }>(
      "SELECT count(*) AS n FROM audit_records WHERE org = 'org-soon-2'",
    );
    expect(Number(rows[0]!.n)).toBe(1_200);
  });

  it("tells onLost how many records PostgreSQL refused, and goes on with the next ones", async () => {
    const lost: [number, string][] = [];
    let refuse = true;
    const flaky: Queryable = {
      query: ((text: string, values?: unknown[]) =>
        refuse
          ? Promise.reject(new Error("connection refused"))
          : db.query(text, values)) as Queryable["query"],
    };
    const audit = new AuditLog(flaky, {
      retentionMs: 86_400_000,
      onLost: (count, err) => lost.push([count, err.message]),
    });
    audit.recordSoon(call("org-soon-3", "x"), "allowed");
    audit.recordSoon(call("org-soon-3", "y"), "error");
    await audit.flush();
    expect(lost).toEqual([[2, "connection refused"]]);
    refuse = false;
    audit.recordSoon(call("org-soon-3", "z"), "allowed");
    const listed = (await audit.forOrganization("org-soon-3", { limit: 10 })).data;
    expect(listed.map((r) => r.tool)).toEqual(["z"]);
  });

  it("holds at most 10,000 records while PostgreSQL does not answer; the rest are told lost", async () => {
    const lost: number[] = [];
    let release!: () => void;
    const stalled = new Promise<void>((resolve) => {
      release = resolve;
    });
    let sent!: () => void;
    const firstSent = new Promise<void>((resolve) => {
      sent = resolve;
    });
    const slow: Queryable = {
      query: (async (text: string, values?: unknown[]) => {
        sent();
        await stalled;
        return db.query(text, values);
      }) as Queryable["query"],
    };
    const audit = new AuditLog(slow, { retentionMs: 86_400_000, onLost: (count) => lost.push(count) });
    audit.recordSoon(call("org-soon-4", "first"), "allowed");
    // The first record's statement is sent, and stalls.
    await firstSent;
    for (let i = 0; i < 10_001; i++) audit.recordSoon(call("org-soon-4", `t${i}`), "allowed");
    expect(lost).toEqual([1]);
    release();
    await audit.flush();
    const { rows } = await db.query<{ n: string }>(
      "SELECT count(*) AS n FROM audit_records WHERE org = 'org-soon-4'",
    );
    expect(Number(rows[0]!.n)).toBe(10_001);
  });
});
