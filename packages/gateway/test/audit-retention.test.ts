import { type AuditIntent, AuditLog } from "@gw/core/audit";
import { ManualClock } from "@gw/core/clock";
import { parseDuration } from "@gw/core/duration";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const database = useTestDatabase();
let db: Postgres;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "test" });
});
afterAll(() => db?.close());

const DAY = 86_400_000;
const intent = (org: string, resourceId: string): AuditIntent => ({
  organization: org,
  actor: { userId: "alice", keyId: "key_1", credential: "api_key" },
  action: "register",
  resourceType: "file",
  resourceId,
  requestId: `req-${resourceId}`,
});

describe("audit retention (AUDIT_RETENTION)", () => {
  it("records past the retention vanish from every read at once, and the sweep deletes them in batches", async () => {
    const clock = new ManualClock(0, Date.parse("2026-01-01T00:00:00Z"));
    const audit = new AuditLog(db, { retentionMs: parseDuration("400d")!, clock });
    for (const id of ["f_old_1", "f_old_2"])
      await audit.settle(await audit.begin(intent("org-r", id)), "allowed");
    clock.advance(DAY);
    await audit.settle(await audit.begin(intent("org-r", "f_new")), "allowed");
    const ids = async () =>
      (await audit.forOrganization("org-r", { limit: 10 })).data.map((r) => r.resourceId);
    expect(await ids()).toEqual(["f_new", "f_old_2", "f_old_1"]);

    // 400 days after the first two: they are gone from the organization's and the resource's reads.
    clock.advance(399 * DAY + 1);
    expect(await ids()).toEqual(["f_new"]);
    expect((await audit.forResource("org-r", { type: "file", id: "f_old_1" }, { limit: 10 })).data).toEqual(
      [],
    );
    const rows = async () =>
      Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM audit_records")).rows[0]!.n);
    expect(await rows()).toBe(3);

    // One row per statement: the sweep goes on until nothing expired is left.
    expect(await audit.sweep(1)).toBe(2);
    expect(await rows()).toBe(1);
    expect(await audit.sweep(1)).toBe(0);
    expect(await ids()).toEqual(["f_new"]);
  });

  it("pages newest first by an opaque cursor, even for records of the same millisecond", async () => {
    const clock = new ManualClock(0, Date.parse("2026-03-01T00:00:00Z"));
    const audit = new AuditLog(db, { retentionMs: DAY, clock });
    for (const id of ["p1", "p2", "p3"])
      await audit.settle(await audit.begin(intent("org-p", id)), "allowed");
    const first = await audit.forOrganization("org-p", { limit: 2 });
    expect(first.data.map((r) => r.resourceId)).toEqual(["p3", "p2"]);
    expect(first.next_cursor).toBe(first.data[1]!.id);
    const second = await audit.forOrganization("org-p", { limit: 2, cursor: first.next_cursor! });
    expect(second).toEqual({ data: [expect.objectContaining({ resourceId: "p1" })], next_cursor: null });
  });
});
