import { exitOnConfigError, loadConfigOrExit } from "@gw/core/config";
import { onShutdown, reportListening } from "@gw/core/process";
import { startTracing, stopTracing } from "@gw/core/tracing";
import { refuseDevelopmentSettings, serviceConfigSchema } from "./config.ts";
import { startService } from "./server.ts";

const config = loadConfigOrExit(serviceConfigSchema);
exitOnConfigError(() => refuseDevelopmentSettings(config));
// Before any client is made: the hooks that make spans are installed only when tracing is on.
await startTracing("service", config);
const service = await exitOnConfigError(() => startService(config));
reportListening(service.port);
onShutdown(async (reason) => {
  service.logger.info({ reason }, "shutting down");
  await service.close();
  await stopTracing();
});
