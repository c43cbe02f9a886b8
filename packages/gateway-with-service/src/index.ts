export { type GatewayWithServiceConfig, gatewayWithServiceConfigSchema } from "./config.ts";
export {
  type GatewayWithServiceConfigs,
  loadConfigs,
  type RunningGatewayWithService,
  startGatewayWithService,
} from "./start.ts";
