import { loadConfigOrExit, onShutdown } from "@gw/core";
import { gatewayConfigSchema } from "./config.ts";
import { startGateway } from "./server.ts";

const config = loadConfigOrExit(gatewayConfigSchema);
const gateway = await startGateway(config);

onShutdown(async (reason) => {
  gateway.logger.info({ reason }, "shutting down");
  await gateway.close();
});
