import { ConfigError, loadConfig } from "@gw/core/config";
import type { Logger } from "@gw/core/logger";
import { type GatewayConfig, gatewayConfigSchema, type RunningGateway, startGateway } from "@gw/gateway";
import { type RunningService, type ServiceConfig, serviceConfigSchema, startService } from "@gw/service";
import { type GatewayWithServiceConfig, gatewayWithServiceConfigSchema } from "./config.ts";

/** Every setting the one process reads, from one environment. */
export interface GatewayWithServiceConfigs {
  own: GatewayWithServiceConfig;
  gateway: GatewayConfig;
  service: ServiceConfig;
}

/** Where this process reaches its own gateway listener: the address it binds, or loopback when it binds them all. */
function loopbackOr(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * The three configurations of the one process. The service's `PORT`, `HOST` and
 * `METRICS_PORT` are the gateway's in this environment, so the service's own
 * listener takes `SERVICE_PORT` and `SERVICE_HOST` and serves its `/metrics`
 * there; hosted MCP tools reach the gateway's proxy on its own port unless
 * `GATEWAY_URL` says otherwise (with `PORT=0` it must), and the service knows
 * the gateway's public URL as the gateway has it. Throws `ConfigError`
 * naming every bad value.
 */
export function loadConfigs(env: NodeJS.ProcessEnv = process.env): GatewayWithServiceConfigs {
  // Every part is read, so that every problem of every part is named at once (each once: the gateway and
  // the service read some settings both).
  const problems = new Set<string>();
  const read = <T>(load: () => T): T | undefined => {
    try {
      return load();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const problem of err.problems) problems.add(problem);
      return undefined;
    }
  };
  const own = read(() => loadConfig(gatewayWithServiceConfigSchema, env));
  const gateway = read(() => loadConfig(gatewayConfigSchema, env));
  // What the service takes from the other two, standing in for them when they were refused (named above).
  const service = read(() =>
    loadConfig(serviceConfigSchema, {
      ...env,
      PORT: String(own?.SERVICE_PORT ?? 0),
      HOST: own?.SERVICE_HOST ?? "127.0.0.1",
      METRICS_PORT: undefined,
      GATEWAY_URL:
        env.GATEWAY_URL ||
        (gateway ? `http://${loopbackOr(gateway.HOST)}:${gateway.PORT}` : "http://127.0.0.1:0"),
      GATEWAY_PUBLIC_URL: env.GATEWAY_PUBLIC_URL || gateway?.GATEWAY_PUBLIC_URL,
    }),
  );
  if (!own || !gateway || !service) throw new ConfigError([...problems]);
  return { own, gateway, service };
}

export interface RunningGatewayWithService {
  gateway: RunningGateway;
  service: RunningService;
  /** The gateway first (its requests, the service's included, get their grace), then the service. */
  close(): Promise<void>;
}

/** The service, then the gateway handing it what it forwards. */
export async function startGatewayWithService(
  configs: GatewayWithServiceConfigs,
  loggers: { gateway?: Logger; service?: Logger } = {},
): Promise<RunningGatewayWithService> {
  const service = await startService(configs.service, loggers.service, { inGatewayProcess: true });
  try {
    const gateway = await startGateway(configs.gateway, loggers.gateway, {}, service.handler);
    return {
      gateway,
      service,
      async close() {
        try {
          await gateway.close();
        } finally {
          await service.close();
        }
      },
    };
  } catch (err) {
    await service.close();
    throw err;
  }
}
