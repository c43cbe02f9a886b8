import type { AddressInfo } from "node:net";
import { createLogger, createMetrics, createRedis, loadConfigOrExit } from "@gw/core";
import { createServiceApp } from "./app.ts";
import { serviceConfigSchema } from "./config.ts";

const config = loadConfigOrExit(serviceConfigSchema);
const logger = createLogger("service", config.LOG_LEVEL);
const redis = createRedis(config.REDIS_URL, { connectionName: "service" });
redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
const app = createServiceApp({ logger, metrics: createMetrics("service"), redis });
const server = app.listen(config.PORT, config.HOST, (err?: Error) => {
  if (err) throw err;
  logger.info({ port: (server.address() as AddressInfo).port }, "service listening");
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    server.close(() => {
      redis.disconnect();
      process.exit(0);
    });
    server.closeIdleConnections();
  });
}
