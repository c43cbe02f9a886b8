import type { AddressInfo } from "node:net";
import { createLogger, createMetrics, createRedis, loadConfigOrExit, onShutdown } from "@gw/core";
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

onShutdown(
  (reason) =>
    new Promise<void>((resolve) => {
      logger.info({ reason }, "shutting down");
      server.close(() => {
        redis.disconnect();
        resolve();
      });
      server.closeIdleConnections();
    }),
);
