import { ManualClock } from "@gw/core/clock";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { describe, expect, it } from "vitest";
import { newOrg, type Org } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";

/** The gateway's clock, injected: it stands still until the test moves it. */
const clock = new ManualClock();
const gw = useGateway({}, undefined, undefined, clock);
const MINUTE = 60_000;
/** LOOKUP_CURSOR_TTL's default, in milliseconds. */
const TTL = 60 * MINUTE;

/** Moves the gateway's clock `ms` ahead. */
const later = (ms: number) => clock.advance(ms);

async function page(o: Org, actor: string, query: Record<string, string>) {
  const res = await o.list(actor, query);
  expect(res.status, await res.clone().text()).toBe(200);
  const body = (await res.json()) as { data: { resourceId: string }[]; next_cursor: string | null };
  return { ids: body.data.map((d) => d.resourceId), cursor: body.next_cursor };
}

async function refused(o: Org, actor: string, query: Record<string, string>) {
  const res = await o.list(actor, query);
  expect(res.status, JSON.stringify(query)).toBe(422);
  const { detail } = await res.json();
  expect(detail).toEqual([
    {
      loc: ["query", "cursor"],
      msg: expect.stringMatching(/^Value error, /),
      type: "value_error",
      input: query.cursor,
    },
  ]);
  return detail[0].msg as string;
}

/** alice's skills s1…s7, each readable by bob. */
async function sevenSkills() {
  const o = await newOrg(gw);
  const skills = ["s1", "s2", "s3", "s4", "s5", "s6", "s7"];
  for (const id of skills) {
    await o.register("alice", "skill", id);
    await o.grant("alice", { resourceType: "skill", resourceId: id, userId: "bob", role: "reader" });
  }
  return o;
}

const revokeBob = (o: Org, id: string) =>
  o.revoke("alice", { resourceType: "skill", resourceId: id, userId: "bob", role: "reader" });

describe("a lookup cursor", () => {
  it("pages in one order of id, whether a resource is owned, shared or public (SpiceDB lists each relation apart)", async () => {
    const o = await newOrg(gw);
    for (const id of ["m", "b", "z"]) await o.register("bob", "skill", id);
    for (const id of ["y", "a", "n"]) {
      await o.register("alice", "skill", id);
      await o.grant("alice", { resourceType: "skill", resourceId: id, userId: "bob", role: "writer" });
    }
    await o.register("alice", "skill", "c");
    await o.grant("alice", { resourceType: "skill", resourceId: "c", userId: "*", role: "reader" });
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const next = await page(o, "bob", { resourceType: "skill", limit: "3", ...(cursor ? { cursor } : {}) });
      pages.push(next.ids);
      cursor = next.cursor;
    } while (cursor);
    expect(pages).toEqual([["a", "b", "c"], ["m", "n", "y"], ["z"]]);
  });

  it("never lists what was revoked after it was issued, and survives writes and the end of the consistency window", async () => {
    const o = await sevenSkills();
    const first = await page(o, "bob", { resourceType: "skill", limit: "2" });
    expect(first.ids).toEqual(["s1", "s2"]);
    const cursor = first.cursor!;

    // Between the pages: alice revokes bob's s3 (next in line), s5 and s6, and the organization goes on writing.
    for (const id of ["s3", "s5", "s6"]) expect((await revokeBob(o, id)).status).toBe(204);
    expect((await o.register("carol", "file", "unrelated")).status).toBe(201);
    await o.grant("alice", { resourceType: "skill", resourceId: "s1", userId: "carol", role: "writer" });

    // Ten minutes on, right after those writes (fully consistent window) …
    later(10 * MINUTE);
    const q = { resourceType: "skill", limit: "2", cursor };
    expect(await page(o, "bob", q)).toEqual({ ids: ["s4", "s7"], cursor: null });
    // … and once that window is over, the same cursor gives the same page.
    await pastRecentWindow(gw.redis, `gw:zedtoken:{organization:${o.org}}`);
    expect(await page(o, "bob", q)).toEqual({ ids: ["s4", "s7"], cursor: null });
    for (const id of ["s3", "s5", "s6"]) expect(await o.check("bob", "skill", id, "reader")).toBe(false);

    // A revoke after the window, past its own window at once (nothing makes lookups fully consistent): still not listed.
    await revokeBob(o, "s7");
    await pastRecentWindow(gw.redis, `gw:zedtoken:{organization:${o.org}}`);
    expect(await page(o, "bob", q)).toEqual({ ids: ["s4"], cursor: null });
  });

  it("continues after the last id shown: what is granted behind it is not repeated, what is granted ahead is listed", async () => {
    const o = await sevenSkills();
    const first = await page(o, "bob", { resourceType: "skill", limit: "3" });
    expect(first.ids).toEqual(["s1", "s2", "s3"]);
    await o.register("alice", "skill", "s0");
    await o.grant("alice", { resourceType: "skill", resourceId: "s0", userId: "bob", role: "reader" });
    await o.register("alice", "skill", "s35");
    await o.grant("alice", { resourceType: "skill", resourceId: "s35", userId: "bob", role: "reader" });
    const second = await page(o, "bob", { resourceType: "skill", limit: "3", cursor: first.cursor! });
    expect(second.ids).toEqual(["s35", "s4", "s5"]);
    expect(await page(o, "bob", { resourceType: "skill", limit: "3", cursor: second.cursor! })).toEqual({
      ids: ["s6", "s7"],
      cursor: null,
    });
  });

  it("expires after LOOKUP_CURSOR_TTL (an hour by default), and not before", async () => {
    const o = await sevenSkills();
    const { cursor } = await page(o, "bob", { resourceType: "skill", limit: "2" });
    const q = { resourceType: "skill", limit: "2", cursor: cursor! };
    later(TTL - MINUTE);
    expect((await page(o, "bob", q)).ids).toEqual(["s3", "s4"]);
    later(MINUTE + 1_000);
    expect(await refused(o, "bob", q)).toMatch(/expired cursor/);
  });

  it("is bound to the principal, the resource type, the role and the limit", async () => {
    const o = await sevenSkills();
    for (const id of ["s1", "s2", "s3"])
      await o.grant("alice", { resourceType: "skill", resourceId: id, userId: "carol", role: "reader" });
    const { cursor } = await page(o, "bob", { resourceType: "skill", limit: "1" });
    expect(cursor).toEqual(expect.any(String));
    const q = { resourceType: "skill", limit: "1", cursor: cursor! };

    expect(await refused(o, "carol", q)).toMatch(/invalid cursor/);
    expect(await refused(o, "bob", { ...q, role: "writer" })).toMatch(/invalid cursor/);
    expect(await refused(o, "bob", { ...q, resourceType: "file" })).toMatch(/invalid cursor/);
    expect(await refused(o, "bob", { ...q, limit: "2" })).toMatch(/invalid cursor/);
    // The same user name in another organization is another principal.
    const other = await newOrg(gw);
    expect(await refused(other, "bob", q)).toMatch(/invalid cursor/);
    // Explicit `role=reader` is the default's query: the same cursor.
    expect((await page(o, "bob", { ...q, role: "reader" })).ids).toEqual(["s2"]);
  });

  it("is tamper-evident: another position or expiry, or any changed character, is refused", async () => {
    const o = await sevenSkills();
    const { cursor } = await page(o, "bob", { resourceType: "skill", limit: "2" });
    const [payload, mac] = cursor!.split(".") as [string, string];
    const [after, expires] = JSON.parse(Buffer.from(payload, "base64url").toString());
    expect(after).toBe("s2");
    const forged = (value: unknown) => `${Buffer.from(JSON.stringify(value)).toString("base64url")}.${mac}`;
    const q = (c: string) => ({ resourceType: "skill", limit: "2", cursor: c });

    expect(await refused(o, "bob", q(forged(["s0", expires])))).toMatch(/invalid cursor/);
    expect(await refused(o, "bob", q(forged([after, expires + 86_400])))).toMatch(/invalid cursor/);
    const flipped = `${payload}.${mac[0] === "A" ? "B" : "A"}${mac.slice(1)}`;
    expect(await refused(o, "bob", q(flipped))).toMatch(/invalid cursor/);
    expect(await refused(o, "bob", q(`${payload}.${mac}.x`))).toMatch(/invalid cursor/);
    expect((await page(o, "bob", q(cursor!))).ids).toEqual(["s3", "s4"]);
  });
});
