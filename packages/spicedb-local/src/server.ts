import { timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { EngineError, FFI_METHODS, type FfiMethodPath, SpiceDBEngine } from "./engine.ts";

export interface SpiceDBLocalOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Required as `authorization: Bearer <key>` on every call but health, like `spicedb serve --grpc-preshared-key`. */
  presharedKey: string;
  /** Schema file written at start (e.g. `spicedb/schema.zed`). */
  schemaFile?: string;
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Sees every authenticated request's method path and serialized message (for tests that check what clients ask). */
  observe?: (path: string, request: Buffer) => void;
}

export interface RunningSpiceDBLocal {
  port: number;
  endpoint: string;
  /** Most unary engine calls that ran at once so far. */
  peakConcurrentEngineCalls(): number;
  close(): Promise<void>;
}

const identity = (b: Buffer) => b;

interface MethodInfo {
  name: string;
  serverStreaming?: boolean;
  clientStreaming?: boolean;
}

const SERVICES: { name: string; methods: readonly MethodInfo[] }[] = [
  v1.PermissionsService,
  v1.SchemaService,
  v1.WatchService,
  v1.ExperimentalService,
].map((service) => ({ name: service.typeName, methods: service.methods }));

const HEALTH_SERVICE = "grpc.health.v1.Health";
const SERVING = Buffer.from([0x08, 0x01]); // HealthCheckResponse{status: SERVING}
const SERVICE_UNKNOWN = Buffer.from([0x08, 0x03]);

/**
 * A local SpiceDB server: the standard `authzed.api.v1` gRPC API on TCP,
 * answered by SpiceDB's own engine in this process. Unary methods the engine
 * exports run through FFI on worker threads; streaming methods are relayed,
 * byte for byte, to the engine's own streaming socket. Messages are never
 * decoded here, so every client of the real API (authzed-node, zed) works
 * unchanged. Data lives in memory.
 */
export async function startSpiceDBLocal(options: SpiceDBLocalOptions): Promise<RunningSpiceDBLocal> {
  const engine = SpiceDBEngine.start();
  // Its own subchannel, so closing this client really closes the connection; the engine's
  // shutdown otherwise waits seconds for it to go away.
  const streaming = new grpc.Client(engine.streamingTarget, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  const expectedAuth = Buffer.from(`Bearer ${options.presharedKey}`);

  const authorized = (metadata: grpc.Metadata): boolean => {
    const value = metadata.get("authorization")[0];
    if (typeof value !== "string") return false;
    const presented = Buffer.from(value);
    return presented.length === expectedAuth.length && timingSafeEqual(presented, expectedAuth);
  };
  const unauthenticated = {
    code: grpc.status.UNAUTHENTICATED,
    details: "invalid preshared key: invalid token",
  };

  const server = new grpc.Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
  for (const service of SERVICES) {
    const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const method of service.methods) {
      const path = `/${service.name}/${method.name}`;
      definition[method.name] = {
        path,
        requestStream: Boolean(method.clientStreaming),
        responseStream: Boolean(method.serverStreaming),
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      };
      implementation[method.name] = handlerFor(path, method, {
        engine,
        streaming,
        authorized,
        unauthenticated,
        observe: options.observe,
      });
    }
    server.addService(definition, implementation);
  }
  server.addService(healthDefinition(), healthImplementation());

  if (options.schemaFile) {
    const schema = await readFile(options.schemaFile, "utf8");
    await engine.call(
      "/authzed.api.v1.SchemaService/WriteSchema",
      v1.WriteSchemaRequest.toBinary(v1.WriteSchemaRequest.create({ schema })),
    );
    options.log?.("schema loaded", { schemaFile: options.schemaFile });
  }

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `${options.host}:${options.port}`,
      grpc.ServerCredentials.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    ),
  );
  options.log?.("SpiceDB (local) listening; its data is in memory and is lost when it stops", {
    endpoint: `${options.host}:${port}`,
  });

  return {
    port,
    endpoint: `${options.host}:${port}`,
    peakConcurrentEngineCalls: () => engine.peakInFlight,
    async close() {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      streaming.close();
      await new Promise((r) => setTimeout(r, 10));
      engine.dispose();
    },
  };
}

interface HandlerContext {
  engine: SpiceDBEngine;
  streaming: grpc.Client;
  authorized: (metadata: grpc.Metadata) => boolean;
  unauthenticated: Partial<grpc.StatusObject>;
  observe: ((path: string, request: Buffer) => void) | undefined;
}

function toStatus(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof EngineError) return { code: err.code, details: err.message };
  const e = err as { code?: number; details?: string; message?: string };
  if (typeof e.code === "number") return { code: e.code, details: e.details ?? e.message ?? "" };
  return { code: grpc.status.INTERNAL, details: e.message ?? String(err) };
}

/** What the relayed call carries over: the caller's deadline. Credentials stay here. */
function relayOptions(call: Pick<grpc.ServerUnaryCall<Buffer, Buffer>, "getDeadline">): grpc.CallOptions {
  const deadline = call.getDeadline();
  return deadline instanceof Date || (typeof deadline === "number" && Number.isFinite(deadline))
    ? { deadline }
    : {};
}

function handlerFor(path: string, method: MethodInfo, ctx: HandlerContext): grpc.UntypedHandleCall {
  if (!method.serverStreaming && !method.clientStreaming) {
    return (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      if (!ctx.authorized(call.metadata)) return callback(ctx.unauthenticated);
      ctx.observe?.(path, call.request);
      if (path in FFI_METHODS) {
        ctx.engine.call(path as FfiMethodPath, call.request).then(
          (response) => callback(null, response),
          (err) => callback(toStatus(err)),
        );
        return;
      }
      callback({
        code: grpc.status.UNIMPLEMENTED,
        details: `${path} is not served by the local SpiceDB engine`,
      });
    };
  }
  if (method.serverStreaming && !method.clientStreaming) {
    return (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      if (!ctx.authorized(call.metadata)) {
        call.emit("error", ctx.unauthenticated);
        return;
      }
      const upstream = ctx.streaming.makeServerStreamRequest(
        path,
        identity,
        identity,
        call.request,
        new grpc.Metadata(),
        relayOptions(call),
      );
      upstream.on("data", (chunk: Buffer) => {
        // Respect the client's flow control: pause the engine while our client catches up.
        if (!call.write(chunk)) {
          upstream.pause();
          call.once("drain", () => upstream.resume());
        }
      });
      upstream.on("end", () => call.end());
      upstream.on("error", (err) => {
        if ((err as grpc.ServiceError).code !== grpc.status.CANCELLED || !call.cancelled)
          call.emit("error", toStatus(err));
      });
      call.on("cancelled", () => upstream.cancel());
    };
  }
  if (method.clientStreaming && !method.serverStreaming) {
    return (call: grpc.ServerReadableStream<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      if (!ctx.authorized(call.metadata)) return callback(ctx.unauthenticated);
      const upstream = ctx.streaming.makeClientStreamRequest(
        path,
        identity,
        identity,
        new grpc.Metadata(),
        relayOptions(call),
        (err, response) => (err ? callback(toStatus(err)) : callback(null, response)),
      );
      call.on("data", (chunk: Buffer) => upstream.write(chunk));
      call.on("end", () => upstream.end());
      call.on("cancelled", () => upstream.cancel());
    };
  }
  return (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    call.emit("error", {
      code: grpc.status.UNIMPLEMENTED,
      details: `${path} is not served by the local SpiceDB engine`,
    });
  };
}

function healthDefinition(): grpc.ServiceDefinition {
  const common = {
    requestStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
  return {
    Check: { ...common, path: `/${HEALTH_SERVICE}/Check`, responseStream: false },
    Watch: { ...common, path: `/${HEALTH_SERVICE}/Watch`, responseStream: true },
  } as grpc.ServiceDefinition;
}

/** `grpc.health.v1`: SERVING for the whole server and each API service; unknown names are SERVICE_UNKNOWN. */
function healthImplementation(): grpc.UntypedServiceImplementation {
  const known = new Set(["", ...SERVICES.map((s) => s.name)]);
  const statusFor = (request: Buffer) => (known.has(serviceName(request)) ? SERVING : SERVICE_UNKNOWN);
  return {
    Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const name = serviceName(call.request);
      if (!known.has(name))
        return callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${name}` });
      callback(null, SERVING);
    },
    Watch: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      call.write(statusFor(call.request));
    },
  };
}

/** Field 1 (`service`, a string) of a HealthCheckRequest. */
function serviceName(request: Buffer): string {
  if (request.length < 2 || request[0] !== 0x0a) return "";
  let length = 0;
  let shift = 0;
  let offset = 1;
  while (offset < request.length) {
    const byte = request[offset++]!;
    length |= (byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) break;
    shift += 7;
  }
  return request.subarray(offset, offset + length).toString("utf8");
}
