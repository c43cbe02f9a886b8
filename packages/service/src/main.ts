import { loadConfigOrExit } from "@gw/core/config";
import { onShutdown, reportListening } from "@gw/core/process";
import { serviceConfigSchema } from "./config.ts";
import { startService } from "./server.ts";

const config = loadConfigOrExit(serviceConfigSchema);
const service = await startService(config);
reportListening(service.port);
onShutdown(async (reason) => {
  service.logger.info({ reason }, "shutting down");
  await service.close();
});
