import { randomBytes } from "node:crypto";
import {
  RESOURCE_TYPES,
  RedisConsistencyTokens,
  type ResourceType,
  SpiceDBClient,
  scopedId,
  update,
  v1,
} from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { readRelationshipLines } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploaded } from "../../test/files.ts";
import { useStack } from "../../test/stack.ts";
import { issuedAt, newCompletionId, newId } from "../ids.ts";
import {
  OrphanReconciler,
  RECONCILE_POSITION_KEY,
  RECONCILED_CONTENT,
  type ReconcileReport,
} from "./reconciler.ts";

const stack = useStack();

const HOUR = 3_600_000;
const clock = new ManualClock();
let reconciler: OrphanReconciler;
let spicedbClose: () => void;
let write: (updates: v1.RelationshipUpdate[]) => Promise<unknown>;

beforeAll(() => {
  const logger = createLogger("reconciler-test", "silent");
  const spicedb = new SpiceDBClient({
    endpoint: stack.spicedb.endpoint,
    presharedKey: stack.spicedb.presharedKey,
    insecure: true,
    deadlineMs: 5_000,
  });
  const tokens = new RedisConsistencyTokens(stack.redis, 0);
  spicedbClose = () => spicedb.close();
  write = (updates) => spicedb.writeRelationships(v1.WriteRelationshipsRequest.create({ updates }));
  // Three relationships a run: every pass over a type takes several runs, each resuming at SpiceDB's cursor.
  reconciler = new OrphanReconciler({
    db: stack.db,
    redis: stack.redis,
    spicedb,
    tokens,
    logger,
    clock,
    options: { intervalMs: HOUR, batch: 3, graceMs: HOUR },
  });
});
afterAll(() => spicedbClose?.());

const TOUCH = v1.RelationshipUpdate_Operation.TOUCH;

/** Relationships of a resource that has no row: an owner and a reader, as a create that died would leave. */
async function orphan(org: string, type: ResourceType, id: string) {
  await write([
    update(TOUCH, org, { type, id }, "owner", scopedId(org, "alice")),
    update(TOUCH, org, { type, id }, "reader", scopedId(org, "bob")),
  ]);
}

const linesOf = (org: string, type: ResourceType, id: string) =>
  readRelationshipLines(stack.spicedb, { resourceType: type, optionalResourceId: scopedId(org, id) });

/** Runs until every service-issued type has been scanned to its end once, from wherever the scan stood. */
async function fullPass(): Promise<ReconcileReport[]> {
  const reports: ReconcileReport[] = [];
  const wrapped = new Set<string>();
  // Every service-issued type: conversations, responses, completions, files, vector stores.
  while (wrapped.size < RECONCILED_CONTENT.length) {
    const report = await reconciler.reconcile();
    if (!report) throw new Error("another replica holds the lock");
    reports.push(report);
    if (report.wrapped) wrapped.add(report.type);
  }
  return reports;
}

describe("the orphan reconciler", () => {
  it("removes relationships whose resource has no content, keeps live ones and ones still being created", async () => {
    const key = await stack.createKey();
    const { org } = key;
    const created = async (path: string, json: unknown) => {
      const res = await stack.call(key.secret, path, { json, user: "alice" });
      expect(res.status).toBe(200);
      return (await res.json()).id as string;
    };
    const liveConversation = await created("/api/v1/llm/conversations", {});
    const liveResponse = await created("/api/v1/llm/responses", { input: "kept" });
    const liveCompletion = await created("/api/v1/llm/chat/completions", {
      messages: [{ role: "user", content: "kept" }],
      store: true,
    });
    const liveFile = (await uploaded(stack, key.secret, { content: "kept", user: "alice" })).id;
    const liveGuardrail = await created("/api/v1/guardrails", {
      name: "kept",
      checks: [{ type: "secrets" }],
      applies_to: "input",
      action: "flag",
    });
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "conversation", resourceId: liveConversation, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);

    const twoHoursAgo = clock.wall() - 2 * HOUR;
    const orphans: [ResourceType, string][] = [
      ["conversation", newId("conv", twoHoursAgo)],
      ["conversation", newId("conv", twoHoursAgo)],
      ["response", newId("resp", twoHoursAgo)],
      ["completion", newCompletionId(twoHoursAgo)],
      ["file", newId("file", twoHoursAgo)],
      // A guardrail whose create died between its ownership and its row.
      ["guardrail", newId("gr", twoHoursAgo)],
      // An id that carries no time (issued before ids were stamped, or not ours): its age is unknown, it goes.
      ["response", `resp_${randomBytes(16).toString("hex")}`],
    ];
    for (const [type, id] of orphans) await orphan(org, type, id);
    // Written a minute ago: its create may still be running (a long model call), so it stays for now.
    const young = newId("resp", clock.wall() - 60_000);
    await orphan(org, "response", young);
    // Another backend's file ids (not of the shape the service issues) are not the service's: never touched.
    await write([update(TOUCH, org, { type: "file", id: "file_1" }, "owner", scopedId(org, "alice"))]);

    const reports = await fullPass();
    expect(reports.every((r) => r.read <= 3)).toBe(true);
    expect(reports.filter((r) => !r.wrapped).length).toBeGreaterThan(0); // a cursor was followed
    for (const [type, id] of orphans) expect(await linesOf(org, type, id)).toEqual([]);
    // An orphan whose relationships straddle two runs is deleted (idempotently) in both.
    expect(reports.reduce((n, r) => n + r.removed, 0)).toBeGreaterThanOrEqual(orphans.length);
    expect(await linesOf(org, "conversation", liveConversation)).toEqual([
      // Created through the API: its organization is written with its first owner (administrators' reads).
      `organization ${org}`,
      `owner ${org}/alice`,
      `reader ${org}/bob`,
    ]);
    expect(await linesOf(org, "response", liveResponse)).toEqual([
      `organization ${org}`,
      `owner ${org}/alice`,
    ]);
    expect(await linesOf(org, "completion", liveCompletion)).toEqual([
      `organization ${org}`,
      `owner ${org}/alice`,
    ]);
    expect(await linesOf(org, "file", liveFile)).toEqual([`organization ${org}`, `owner ${org}/alice`]);
    expect(await linesOf(org, "guardrail", liveGuardrail)).toEqual([
      `organization ${org}`,
      `owner ${org}/alice`,
    ]);
    expect(await linesOf(org, "response", young)).toEqual([`owner ${org}/alice`, `reader ${org}/bob`]);
    expect(await linesOf(org, "file", "file_1")).toEqual([`owner ${org}/alice`]);
    // bob, who was a reader of the orphans, finds only the live conversation in his lookups.
    const listed = await stack.call(
      key.secret,
      "/api/v1/authorization/llm/resources?resourceType=conversation&role=reader",
      { user: "bob" },
    );
    expect(listed.status).toBe(200);
    expect((await listed.json()).data).toEqual([{ resourceId: liveConversation }]);

    // Past the grace, the young one goes too; the live ones still stay.
    clock.advance(2 * HOUR);
    await fullPass();
    expect(await linesOf(org, "response", young)).toEqual([]);
    expect(await linesOf(org, "response", liveResponse)).toEqual([
      `organization ${org}`,
      `owner ${org}/alice`,
    ]);
    expect(await linesOf(org, "conversation", liveConversation)).toHaveLength(3);
  });

  it("starts over when its kept cursor is not one SpiceDB takes", async () => {
    await stack.redis.set(
      RECONCILE_POSITION_KEY,
      JSON.stringify({ type: "response", cursor: "bm90IGEgY3Vyc29y" }),
    );
    const report = await reconciler.reconcile();
    expect(report?.type).toBe("response");
  });

  it("reads the time of issue from the ids it issues, and none from others", () => {
    const at = Date.UTC(2026, 5, 1);
    expect(issuedAt(newId("conv", at), at + 1)).toBe(at);
    expect(issuedAt(newCompletionId(at), at + 1)).toBe(at);
    expect(newId("resp", at)).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(issuedAt("conv_not-ours", at)).toBeUndefined();
    expect(issuedAt(`conv_${"f".repeat(32)}`, at)).toBeUndefined(); // far in the future: no time of ours
    expect(RESOURCE_TYPES).toContain("completion");
  });
});
