import { exitOnConfigError, loadConfigOrExit } from "@gw/core/config";
import { onShutdown, reportListening, SHUTDOWN_DEADLINE_MS } from "@gw/core/process";
import { startTracing, stopTracing } from "@gw/core/tracing";
import { gatewayConfigSchema } from "./config.ts";
import { startGateway } from "./server.ts";

const config = loadConfigOrExit(gatewayConfigSchema);
// Before any client is made: the hooks that make spans are installed only when tracing is on.
await startTracing("gateway", config);
const gateway = await exitOnConfigError(() => startGateway(config));
reportListening(gateway.port);

onShutdown(
  async (reason) => {
    gateway.logger.info({ reason }, "shutting down");
    await gateway.close();
    await stopTracing();
  },
  // In-flight requests get their grace; the rest of the shutdown has the default's time besides.
  { deadlineMs: config.SHUTDOWN_GRACE_MS + SHUTDOWN_DEADLINE_MS },
);
