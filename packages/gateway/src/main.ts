import { loadConfigOrExit } from "@gw/core/config";
import { onShutdown, reportListening } from "@gw/core/process";
import { gatewayConfigSchema } from "./config.ts";
import { startGateway } from "./server.ts";

const config = loadConfigOrExit(gatewayConfigSchema);
const gateway = await startGateway(config);
reportListening(gateway.port);

onShutdown(async (reason) => {
  gateway.logger.info({ reason }, "shutting down");
  await gateway.close();
});
