import { env } from "@gw/core/config";
import { z } from "zod";

/**
 * What the one process reads besides the gateway's and the service's own
 * settings, which it reads from the same environment: where the service
 * listens for its probes and metrics (its requests come through the gateway,
 * in process), since `PORT`, `HOST` and `METRICS_PORT` are the gateway's.
 */
export const gatewayWithServiceConfigSchema = z.object({
  /** Port of the service's own listener in the one process: its probes and `/metrics` (the service's `PORT`). Default 8081. */
  SERVICE_PORT: env.port(8081),
  /** Address the service's own listener binds in the one process (the service's `HOST`). Default 127.0.0.1. */
  SERVICE_HOST: z.string().default("127.0.0.1"),
});

export type GatewayWithServiceConfig = z.output<typeof gatewayWithServiceConfigSchema>;
