export { createServiceApp } from "./app.ts";
export { type ServiceConfig, serviceConfigSchema } from "./config.ts";
export { type RunningService, startService } from "./server.ts";
