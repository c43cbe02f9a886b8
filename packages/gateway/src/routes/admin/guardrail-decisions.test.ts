import { AuditLog } from "@gw/core/audit";
import { createPostgres } from "@gw/core/postgres";
import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { freshOrg, useGateway } from "../../../test/harness.ts";

const gw = useGateway();
const PATH = "/api/v1/admin/audit/guardrail-decisions";

/** Decisions written as the model-call pipeline writes them: `[guardrail, action, at]`. */
async function decided(
  org: string,
  keyId: string,
  decisions: [string, "block" | "redact" | "flag", Date?][],
) {
  const db = createPostgres(gw.database.url, { connectionName: "test" });
  try {
    const audit = new AuditLog(db, { retentionMs: 86_400_000 });
    for (const [guardrail, action, at] of decisions) {
      const record = await audit.record(
        {
          organization: org,
          actor: { userId: "alice", keyId, credential: "api_key" },
          action: "guardrail.decision",
          resourceType: "guardrail",
          resourceId: guardrail,
          check: "ban_words",
          guardrailAction: action,
          direction: "input",
          requestId: "req-1",
        },
        "allowed",
      );
      if (at)
        await db.query("UPDATE audit_records SET at = $1 WHERE seq = $2", [at, record.id.split("-")[1]]);
    }
  } finally {
    await db.close();
  }
}

describe("guardrail decisions per guardrail (the console's usage page)", () => {
  it("counts each guardrail's decisions by action, in the organization and the range only", async () => {
    const org = freshOrg();
    const admin = await gw.createKey({ org, owner: "root", permissions: ["admin:console"] });
    const otherOrg = freshOrg();
    const other = await gw.createKey({ org: otherOrg, owner: "root", permissions: ["admin:console"] });
    const a = `gr_${"a".repeat(32)}`;
    const b = `gr_${"b".repeat(32)}`;
    const hourAgo = new Date(Date.now() - 3_600_000);
    await decided(org, admin.record.id, [
      [a, "block"],
      [a, "block"],
      [a, "flag"],
      [b, "redact"],
      [b, "block", hourAgo],
    ]);
    await decided(otherOrg, other.record.id, [[a, "flag"]]);

    const all = await gw.call(PATH, { bearer: admin.secret });
    expect(all.status).toBe(200);
    expect(await all.json()).toEqual({
      object: "list",
      data: [
        { guardrail_id: a, block: 2, redact: 0, flag: 1 },
        { guardrail_id: b, block: 1, redact: 1, flag: 0 },
      ],
    });
    const since = new Date(Date.now() - 60_000).toISOString();
    expect((await (await gw.call(`${PATH}?since=${since}`, { bearer: admin.secret })).json()).data).toEqual([
      { guardrail_id: a, block: 2, redact: 0, flag: 1 },
      { guardrail_id: b, block: 0, redact: 1, flag: 0 },
    ]);
    expect((await (await gw.call(PATH, { bearer: other.secret })).json()).data).toEqual([
      { guardrail_id: a, block: 0, redact: 0, flag: 1 },
    ]);

    await expectJsonError(await gw.call(`${PATH}?since=yesterday`, { bearer: admin.secret }), 422);
    const plain = await gw.createKey({ org, owner: "bob" });
    await expectJsonError(await gw.call(PATH, { bearer: plain.secret }), 403);
  });
});
