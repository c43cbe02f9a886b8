import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpiceDBEngine } from "../src/engine.ts";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "../src/server.ts";

const SCHEMA = resolve(import.meta.dirname, "../../../spicedb/schema.zed");
const KEY = "test-preshared-key";
let server: RunningSpiceDBLocal;
let client: v1.ZedClientInterface;

const obj = (objectType: string, objectId: string) => v1.ObjectReference.create({ objectType, objectId });
const user = (id: string) => v1.SubjectReference.create({ object: obj("user", id) });
const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });
const rel = (resource: string, relation: string, subject: string) =>
  v1.Relationship.create({ resource: obj("conversation", resource), relation, subject: user(subject) });
const touch = (...relationships: v1.Relationship[]) =>
  v1.WriteRelationshipsRequest.create({
    updates: relationships.map((relationship) =>
      v1.RelationshipUpdate.create({ operation: v1.RelationshipUpdate_Operation.TOUCH, relationship }),
    ),
  });

beforeAll(async () => {
  server = await startSpiceDBLocal({ host: "127.0.0.1", port: 0, presharedKey: KEY, schemaFile: SCHEMA });
  // Exactly as an application would connect to `spicedb serve`: the stock client, unchanged.
  client = v1.NewClient(KEY, server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
});
afterAll(async () => {
  client.close();
  await server.close();
});

describe("the local SpiceDB server speaks authzed.api.v1 to the stock authzed-node client", () => {
  it("serves the schema it loaded at start (ReadSchema) and accepts a new one (WriteSchema)", async () => {
    const { schemaText } = await client.promises.readSchema(v1.ReadSchemaRequest.create({}));
    expect(schemaText).toContain("definition conversation");
    const written = await client.promises.writeSchema(
      v1.WriteSchemaRequest.create({ schema: await readFile(SCHEMA, "utf8") }),
    );
    expect(written.writtenAt?.token).toBeTruthy();
  });

  it("writes, checks, bulk-checks, reads, looks up, expands and deletes", async () => {
    const written = await client.promises.writeRelationships(
      touch(rel("acme/c1", "owner", "acme/alice"), rel("acme/c1", "reader", "acme/bob")),
    );
    const atWrite = v1.Consistency.create({
      requirement: { oneofKind: "atLeastAsFresh", atLeastAsFresh: written.writtenAt! },
    });
    const check = await client.promises.checkPermission(
      v1.CheckPermissionRequest.create({
        consistency: atWrite,
        resource: obj("conversation", "acme/c1"),
        permission: "write",
        subject: user("acme/alice"),
      }),
    );
    expect(check.permissionship).toBe(v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION);

    const bulk = await client.promises.checkBulkPermissions(
      v1.CheckBulkPermissionsRequest.create({
        consistency: atWrite,
        items: [
          {
            resource: obj("conversation", "acme/c1"),
            permission: "read",
            subject: user("acme/bob"),
            context: undefined,
          },
          {
            resource: obj("conversation", "acme/c1"),
            permission: "write",
            subject: user("acme/bob"),
            context: undefined,
          },
        ],
      }),
    );
    expect(
      bulk.pairs.map((p) => (p.response.oneofKind === "item" ? p.response.item.permissionship : "error")),
    ).toEqual([
      v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION,
      v1.CheckPermissionResponse_Permissionship.NO_PERMISSION,
    ]);

    const read = await client.promises.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: atWrite,
        relationshipFilter: v1.RelationshipFilter.create({
          resourceType: "conversation",
          optionalResourceId: "acme/c1",
        }),
      }),
    );
    expect(
      read
        .map(
          (r) =>
            `${r.relationship?.resource?.objectType}:${r.relationship?.resource?.objectId} ${r.relationship?.relation} user:${r.relationship?.subject?.object?.objectId}`,
        )
        .sort(),
    ).toEqual(["conversation:acme/c1 owner user:acme/alice", "conversation:acme/c1 reader user:acme/bob"]);

    const resources = await client.promises.lookupResources(
      v1.LookupResourcesRequest.create({
        consistency: atWrite,
        resourceObjectType: "conversation",
        permission: "read",
        subject: user("acme/bob"),
      }),
    );
    expect(resources.map((r) => r.resourceObjectId)).toEqual(["acme/c1"]);

    const subjects = await client.promises.lookupSubjects(
      v1.LookupSubjectsRequest.create({
        consistency: atWrite,
        resource: obj("conversation", "acme/c1"),
        permission: "read",
        subjectObjectType: "user",
      }),
    );
    expect(subjects.map((s) => s.subject?.subjectObjectId).sort()).toEqual(["acme/alice", "acme/bob"]);

    const tree = await client.promises.expandPermissionTree(
      v1.ExpandPermissionTreeRequest.create({
        consistency: atWrite,
        resource: obj("conversation", "acme/c1"),
        permission: "read",
      }),
    );
    expect(JSON.stringify(v1.ExpandPermissionTreeResponse.toJson(tree))).toContain("acme/bob");

    const deleted = await client.promises.deleteRelationships(
      v1.DeleteRelationshipsRequest.create({
        relationshipFilter: v1.RelationshipFilter.create({
          resourceType: "conversation",
          optionalResourceId: "acme/c1",
          optionalRelation: "reader",
        }),
      }),
    );
    const after = await client.promises.checkPermission(
      v1.CheckPermissionRequest.create({
        consistency: v1.Consistency.create({
          requirement: { oneofKind: "atLeastAsFresh", atLeastAsFresh: deleted.deletedAt! },
        }),
        resource: obj("conversation", "acme/c1"),
        permission: "read",
        subject: user("acme/bob"),
      }),
    );
    expect(after.permissionship).toBe(v1.CheckPermissionResponse_Permissionship.NO_PERMISSION);
  });

  it("streams changes through Watch", async () => {
    // Watching from a known revision: however late the stream opens, it sees what came after.
    const before = await client.promises.writeRelationships(
      touch(rel("acme/watch-start", "owner", "acme/alice")),
    );
    const stream = client.watch(
      v1.WatchRequest.create({
        optionalObjectTypes: ["conversation"],
        optionalStartCursor: before.writtenAt!,
      }),
    );
    const received = new Promise<string>((resolvePromise, reject) => {
      stream.on("data", (response: v1.WatchResponse) => {
        for (const update of response.updates) {
          const id = update.relationship?.resource?.objectId;
          if (id === "acme/watched") resolvePromise(`${id}#${update.relationship?.relation}`);
        }
      });
      stream.on("error", reject);
    });
    await client.promises.writeRelationships(touch(rel("acme/watched", "owner", "acme/alice")));
    expect(await received).toBe("acme/watched#owner");
    stream.cancel();
  });

  it("maps engine errors to their gRPC status codes", async () => {
    const unknownType = client.promises.checkPermission(
      v1.CheckPermissionRequest.create({
        consistency: FULLY,
        resource: obj("nothing", "x"),
        permission: "read",
        subject: user("acme/a"),
      }),
    );
    await expect(unknownType).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
    const badSchema = client.promises.writeSchema(v1.WriteSchemaRequest.create({ schema: "definition {" }));
    await expect(badSchema).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });

  it("requires the preshared key on unary and streaming calls, like spicedb serve", async () => {
    for (const key of ["wrong-key", ""]) {
      const intruder = v1.NewClient(key, server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
      await expect(intruder.promises.readSchema(v1.ReadSchemaRequest.create({}))).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      await expect(
        intruder.promises.readRelationships(
          v1.ReadRelationshipsRequest.create({
            relationshipFilter: { resourceType: "conversation" } as v1.RelationshipFilter,
          }),
        ),
      ).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      intruder.close();
    }
  });

  it("answers the standard gRPC health check without credentials", async () => {
    const health = new grpc.Client(server.endpoint, grpc.credentials.createInsecure());
    const check = (service: string) =>
      new Promise<Buffer>((resolvePromise, reject) => {
        const request = Buffer.concat([Buffer.from([0x0a, service.length]), Buffer.from(service)]);
        health.makeUnaryRequest(
          "/grpc.health.v1.Health/Check",
          (b: Buffer) => b,
          (b: Buffer) => b,
          service ? request : Buffer.alloc(0),
          (err, value) => (err ? reject(err) : resolvePromise(value!)),
        );
      });
    expect([...(await check(""))]).toEqual([0x08, 0x01]); // SERVING
    expect([...(await check("authzed.api.v1.PermissionsService"))]).toEqual([0x08, 0x01]);
    await expect(check("no.such.Service")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    health.close();
  });

  it("runs unary engine calls off the event loop, several at once", async () => {
    const checks = Array.from({ length: 64 }, (_, i) =>
      client.promises.checkPermission(
        v1.CheckPermissionRequest.create({
          consistency: FULLY,
          resource: obj("conversation", `acme/c${i}`),
          permission: "read",
          subject: user("acme/alice"),
        }),
      ),
    );
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 0);
    await Promise.all(checks);
    clearInterval(ticker);
    expect(server.peakConcurrentEngineCalls()).toBeGreaterThan(1);
    expect(ticks).toBeGreaterThan(0);
  });
});

describe("an engine started and shut down on worker threads (as an engine replacement does)", () => {
  it("serves calls once started, and shuts down while a connection to its streaming socket is still open", async () => {
    const engine = await SpiceDBEngine.startAsync({});
    const read = () =>
      engine.call(
        "/authzed.api.v1.SchemaService/ReadSchema",
        v1.ReadSchemaRequest.toBinary(v1.ReadSchemaRequest.create({})),
      );
    // No schema yet: the engine answers, with its own error.
    await expect(read()).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    const streaming = new grpc.Client(engine.streamingTarget, grpc.credentials.createInsecure(), {
      "grpc.use_local_subchannel_pool": 1,
    });
    await new Promise<void>((done, fail) =>
      streaming.waitForReady(Date.now() + 10_000, (err) => (err ? fail(err) : done())),
    );
    // The shutdown waits for that connection; the event loop, free, closes it meanwhile.
    const disposed = engine.disposeAsync();
    streaming.close();
    await disposed;
    await expect(read()).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });
});
