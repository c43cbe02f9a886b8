import {
  built,
  callerIsOwner,
  organizationUpdates,
  ownerFilter,
  type ResourceRef,
  update,
  v1,
} from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { describe, expect, it } from "vitest";

const resource: ResourceRef = { type: "response", id: "resp_1" };
const principal = { org: "acme", user: "alice" } as Principal;

describe("SpiceDB messages built without protobuf-ts's copies", () => {
  it("encode exactly as the same messages made by create", () => {
    const expiresAt = new Date("2026-12-01T10:00:00.250Z");
    const updates = [
      update(v1.RelationshipUpdate_Operation.TOUCH, "acme", resource, "reader", "*", expiresAt),
      ...organizationUpdates("acme", resource),
    ];
    const preconditions = [callerIsOwner(principal, resource)];
    const ours = built(v1.WriteRelationshipsRequest, { updates, optionalPreconditions: preconditions });
    // create(value) deep-copies: round-tripping through JSON gives the same message made by create alone.
    const made = v1.WriteRelationshipsRequest.fromJson(v1.WriteRelationshipsRequest.toJson(ours));
    expect(v1.WriteRelationshipsRequest.create(made)).toEqual(made);
    expect(Buffer.from(v1.WriteRelationshipsRequest.toBinary(ours))).toEqual(
      Buffer.from(v1.WriteRelationshipsRequest.toBinary(v1.WriteRelationshipsRequest.create(made))),
    );
    expect(made.updates[0]?.relationship?.optionalCaveat?.caveatName).toBe("same_organization");
    expect(made.updates[0]?.relationship?.optionalExpiresAt).toEqual({
      seconds: "1796119200",
      nanos: 250_000_000,
    });
  });

  it("keep a field's default where it is given as undefined, as create does", () => {
    const filter = built(v1.RelationshipFilter, { resourceType: "response", optionalResourceId: undefined });
    expect(filter).toEqual(v1.RelationshipFilter.create({ resourceType: "response" }));
    expect(v1.RelationshipFilter.toBinary(filter)).toEqual(
      v1.RelationshipFilter.toBinary(v1.RelationshipFilter.create({ resourceType: "response" })),
    );
    expect(ownerFilter("acme", resource).optionalRelation).toBe("owner");
  });
});
