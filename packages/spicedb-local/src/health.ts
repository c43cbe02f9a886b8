import * as grpc from "@grpc/grpc-js";
import { HealthImplementation, service } from "grpc-health-check";

/** `grpc.health.v1.Health`: SERVING for the whole server ("") and each named service. */
export function addHealthService(server: grpc.Server, serviceNames: string[]): void {
  const statuses = Object.fromEntries(["", ...serviceNames].map((name) => [name, "SERVING" as const]));
  new HealthImplementation(statuses).addToServer(server);
}

type CheckCallback = (err: grpc.ServiceError | null, response?: { status?: string }) => void;
interface HealthClient extends grpc.Client {
  Check(request: { service: string }, options: grpc.CallOptions, callback: CheckCallback): void;
}
const HealthClient = grpc.makeClientConstructor(
  service as grpc.ServiceDefinition,
  "grpc.health.v1.Health",
) as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
) => HealthClient;

/** Whether a gRPC server at `host:port` answers the standard health check with SERVING. */
export function isServing(endpoint: string, timeoutMs = 1_000): Promise<boolean> {
  const client = new HealthClient(endpoint, grpc.credentials.createInsecure());
  return new Promise<boolean>((resolve) => {
    client.Check({ service: "" }, { deadline: Date.now() + timeoutMs }, (err, response) =>
      resolve(!err && response?.status === "SERVING"),
    );
  }).finally(() => client.close());
}
