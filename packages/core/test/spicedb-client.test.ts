import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpiceDBClient, SpiceDBUnavailable, v1 } from "../src/authz/spicedb-client.ts";

/**
 * SpiceDB as a flaky network shows it: each method answers UNAVAILABLE as many times as `failures` says,
 * then succeeds. (The real engine cannot be made to fail on cue; what is tested is the client's transport.)
 */
const failures: Record<string, number> = {};
const calls: Record<string, number> = {};
let server: grpc.Server;
let client: SpiceDBClient;

function unary<Req, Res>(
  path: string,
  request: { fromBinary(b: Uint8Array): Req },
  response: { toBinary(m: Res): Uint8Array },
  answer: Res,
): [string, grpc.MethodDefinition<Req, Res>, grpc.handleUnaryCall<Req, Res>] {
  return [
    path,
    {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: () => Buffer.alloc(0),
      requestDeserialize: (b) => request.fromBinary(b),
      responseSerialize: (m) => Buffer.from(response.toBinary(m)),
      responseDeserialize: () => answer,
    },
    (_call, callback) => {
      calls[path] = (calls[path] ?? 0) + 1;
      if ((failures[path] ?? 0) > 0) {
        failures[path]!--;
        return callback({ code: grpc.status.UNAVAILABLE, details: "flaky" });
      }
      callback(null, answer);
    },
  ];
}

const CHECK = "/authzed.api.v1.PermissionsService/CheckPermission";
const WRITE = "/authzed.api.v1.PermissionsService/WriteRelationships";

beforeAll(async () => {
  server = new grpc.Server();
  const methods = [
    unary(
      CHECK,
      v1.CheckPermissionRequest,
      v1.CheckPermissionResponse,
      v1.CheckPermissionResponse.create({
        permissionship: v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION,
      }),
    ),
    unary(
      WRITE,
      v1.WriteRelationshipsRequest,
      v1.WriteRelationshipsResponse,
      v1.WriteRelationshipsResponse.create({}),
    ),
  ];
  server.addService(
    Object.fromEntries(methods.map(([path, definition]) => [path, definition])),
    Object.fromEntries(methods.map(([path, , handler]) => [path, handler])),
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  client = new SpiceDBClient({
    endpoint: `127.0.0.1:${port}`,
    presharedKey: "k",
    insecure: true,
    deadlineMs: 5_000,
  });
});
afterAll(() => {
  client.close();
  server.forceShutdown();
});

describe("the SpiceDB client's transport", () => {
  it("retries a read that meets UNAVAILABLE (gRPC's retry policy), up to two more attempts", async () => {
    failures[CHECK] = 2;
    calls[CHECK] = 0;
    const answer = await client.checkPermission(v1.CheckPermissionRequest.create({}));
    expect(answer.permissionship).toBe(v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION);
    expect(calls[CHECK]).toBe(3);

    failures[CHECK] = 3;
    calls[CHECK] = 0;
    await expect(client.checkPermission(v1.CheckPermissionRequest.create({}))).rejects.toBeInstanceOf(
      SpiceDBUnavailable,
    );
    expect(calls[CHECK]).toBe(3);
  });

  it("never retries a write: its answer may have been lost after it landed", async () => {
    failures[WRITE] = 1;
    calls[WRITE] = 0;
    await expect(client.writeRelationships(v1.WriteRelationshipsRequest.create({}))).rejects.toBeInstanceOf(
      SpiceDBUnavailable,
    );
    expect(calls[WRITE]).toBe(1);
  });
});
