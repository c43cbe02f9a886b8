export type { CreateApiKeyInput } from "./api-keys/schema.ts";
export { hashSecret, SECRET_PREFIX } from "./api-keys/secret.ts";
export { ApiKeyStore } from "./api-keys/store.ts";
export { createGatewayApp } from "./app.ts";
export { type GatewayConfig, gatewayConfigSchema } from "./config.ts";
export { createGatewayMetrics } from "./metrics.ts";
export { GATEWAY_OPERATIONS } from "./routes/operations.ts";
export { startGateway } from "./server.ts";
export { generateSigningJwk } from "./tokens/signing-keys.ts";
