import { exitOnConfigError, loadConfigOrExit } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { onShutdown, reportListening } from "@gw/core/process";
import { startTracing, stopTracing } from "@gw/core/tracing";
import { refuseDevelopmentSettings, serviceConfigSchema } from "./config.ts";
import { startEvalWorkerProcess } from "./eval-worker-process.ts";

// `pnpm --filter @gw/service worker`: eval runs in a process of their own, on the service's configuration.
const config = loadConfigOrExit(serviceConfigSchema);
exitOnConfigError(() => refuseDevelopmentSettings(config));
// Before any client is made: the hooks that make spans are installed only when tracing is on.
await startTracing("eval-worker", config);
const logger = createLogger("eval-worker", config.LOG_LEVEL);
const worker = await startEvalWorkerProcess(config, logger);
reportListening(worker.port);
onShutdown(async (reason) => {
  logger.info({ reason }, "shutting down");
  await worker.close();
  await stopTracing();
});
