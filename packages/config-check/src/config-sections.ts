import { devstackConfigSchema, localVectorDatabaseConfigSchema } from "@gw/devstack";
import { gatewayConfigSchema } from "@gw/gateway";
import { gatewayWithServiceConfigSchema } from "@gw/gateway-with-service";
import { serviceConfigSchema } from "@gw/service";
import { spicedbLocalConfigSchema } from "@gw/spicedb-local";
import type { ConfigSection } from "./config-docs.ts";

/** Every process's configuration schema, in the order `docs/configuration.md` shows them. */
export const CONFIG_SECTIONS: ConfigSection[] = [
  {
    title: "Gateway",
    source: "packages/gateway/src/config.ts",
    intro: "The process clients talk to: authentication, rate limits, tokens, authorization, forwarding.",
    schema: gatewayConfigSchema,
  },
  {
    title: "Service",
    source: "packages/service/src/config.ts",
    intro: "Responses, conversations, usage, eval schedules and sandbox push, behind the gateway.",
    schema: serviceConfigSchema,
  },
  {
    title: "Gateway with the service in its process",
    source: "packages/gateway-with-service/src/config.ts",
    intro:
      "One process instead of two (`node packages/gateway-with-service/src/main.ts`, or `SERVICE_IN_GATEWAY=true pnpm start`; docs/adr/0026-service-in-the-gateways-process.md). It reads every gateway and service setting above from the one environment: `PORT`, `HOST` and `METRICS_PORT` are the gateway's; `SERVICE_URL`, `SERVICE_TIMEOUT_MS` and `SERVICE_IDLE_TIMEOUT_MS` are not read; the service's `GATEWAY_URL` defaults to the gateway's own listener and its `GATEWAY_PUBLIC_URL` to the gateway's. Besides those:",
    schema: gatewayWithServiceConfigSchema,
  },
  {
    title: "Local SpiceDB",
    source: "packages/spicedb-local/src/config.ts",
    intro: "The development SpiceDB server that `pnpm start` and the tests run (never for production).",
    schema: spicedbLocalConfigSchema,
  },
  {
    title: "Local vector database",
    source: "packages/devstack/src/vector-database-config.ts",
    intro:
      "The development vector database (PGlite with pgvector, over PostgreSQL's wire protocol) that `pnpm start` and the tests run (never for production): docs/adr/0020-vector-engine.md.",
    schema: localVectorDatabaseConfigSchema,
  },
  {
    title: "`pnpm start`",
    source: "packages/devstack/src/config.ts",
    intro: "The development stack's own variables; it passes the rest on to the processes above.",
    schema: devstackConfigSchema,
  },
];
