import { loadConfigOrExit } from "@gw/core";
import { gatewayConfigSchema } from "./config.ts";
import { startGateway } from "./server.ts";

const config = loadConfigOrExit(gatewayConfigSchema);
const gateway = await startGateway(config);

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, async () => {
    gateway.logger.info({ signal }, "shutting down");
    await gateway.close();
    process.exit(0);
  });
}
