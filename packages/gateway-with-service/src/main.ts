import { exitOnConfigError } from "@gw/core/config";
import { onShutdown, reportListening, SHUTDOWN_DEADLINE_MS } from "@gw/core/process";
import { startTracing, stopTracing } from "@gw/core/tracing";
import { refuseDevelopmentSettings } from "@gw/service";
import { loadConfigs, startGatewayWithService } from "./start.ts";

const configs = exitOnConfigError(() => loadConfigs());
exitOnConfigError(() => refuseDevelopmentSettings(configs.service));
// Before any client is made: one tracer for the process, its spans named as the gateway's.
await startTracing("gateway", configs.gateway);
const running = await exitOnConfigError(() => startGatewayWithService(configs));
reportListening(running.gateway.port);

onShutdown(
  async (reason) => {
    running.gateway.logger.info({ reason }, "shutting down");
    await running.close();
    await stopTracing();
  },
  // In-flight requests get their grace; the service's close and the rest have the default's time besides.
  { deadlineMs: configs.gateway.SHUTDOWN_GRACE_MS + 2 * SHUTDOWN_DEADLINE_MS },
);
