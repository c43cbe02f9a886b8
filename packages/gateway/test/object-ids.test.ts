import { randomBytes } from "node:crypto";
import { fitsObjectId, MAX_OBJECT_ID_LENGTH, scopedId } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { describe, expect, it } from "vitest";
import { newOrg } from "./authorization-helpers.ts";
import { useGateway } from "./harness.ts";

const gw = useGateway();

const principalOf = (org: string, user: string): Principal => ({
  org,
  user,
  keyId: "key_ids",
  permissions: [],
  credential: "api_key",
  onBehalfOf: true,
});

/** An id whose scoped, encoded form in `org` is exactly `length` characters (`=XX` per `~`). */
const idEncodedTo = (org: string, length: number) => {
  const room = length - org.length - 1;
  return `${"~".repeat(Math.floor(room / 3))}${"a".repeat(room % 3)}`;
};

describe("ids SpiceDB cannot hold (over 1,024 bytes once scoped and encoded)", () => {
  it("fitsObjectId says exactly what scopedId makes, without making it", () => {
    const org = "org-fits";
    for (const id of [
      "conv_1",
      "~".repeat(300),
      "😀".repeat(84),
      "😀".repeat(85),
      "\ud800".repeat(113),
      "a\u0000b",
    ])
      expect(fitsObjectId(org, id), id.slice(0, 8)).toBe(scopedId(org, id).length <= MAX_OBJECT_ID_LENGTH);
    expect(fitsObjectId(org, idEncodedTo(org, 1024))).toBe(true);
    expect(fitsObjectId(org, `${idEncodedTo(org, 1024)}a`)).toBe(false);
  });

  it("an id of exactly 1,024 is written and checked; one past it is nobody's, asked of no one, alone or in bulk", async () => {
    const org = `org-${randomBytes(4).toString("hex")}`;
    const alice = principalOf(org, "alice");
    const longest = { type: "file" as const, id: idEncodedTo(org, 1024) };
    const tooLong = { type: "file" as const, id: `${longest.id}a` };
    await gw.authorization.createOwnership(alice, longest);
    expect(await gw.authorization.check(alice, longest, "owner")).toBe(true);
    expect(await gw.authorization.check(alice, tooLong, "reader")).toBe(false);
    expect(
      await gw.authorization.check(alice, { type: "conversation", id: "😀".repeat(100) }, "reader"),
    ).toBe(false);
    expect(
      await gw.authorization.checkAll(alice, [
        { resource: tooLong, role: "reader" },
        { resource: longest, role: "owner" },
        { resource: { type: "response", id: "😀".repeat(100) }, role: "reader" },
      ]),
    ).toEqual([false, true, false]);
    expect(await gw.authorization.checkAll(alice, [{ resource: tooLong, role: "reader" }])).toEqual([false]);
  });

  it("the authorization routes' longest resource id, in the longest organization id, fits", async () => {
    // resourceIdSchema: 256 printable characters, each at most `=XX`; organization ids: 64 characters.
    const o = await newOrg(gw, `o${"x".repeat(63)}`);
    const id = "~".repeat(256);
    expect(fitsObjectId(o.org, id)).toBe(true);
    expect((await o.register("alice", "file", id)).status).toBe(201);
    expect(
      (await o.grant("alice", { resourceType: "file", resourceId: id, userId: "bob", role: "reader" }))
        .status,
    ).toBe(204);
    expect(await o.check("bob", "file", id, "reader")).toBe(true);
    // One more character is refused at the edge, before SpiceDB (422, not 500).
    expect((await o.register("alice", "file", `${id}~`)).status).toBe(422);
    const res = await o.checkResponse("alice", {
      resourceType: "file",
      resourceId: "😀".repeat(100),
      role: "reader",
    });
    expect(res.status).toBe(422);
  });
});
