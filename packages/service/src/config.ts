import {
  checkSpiceDBEnv,
  env,
  localRedisUrl,
  metricsEndpointOf,
  metricsEnvShape,
  spicedbClientOptions,
  spicedbEnvShape,
} from "@gw/core";
import { z } from "zod";
import { checkSandboxEnv, sandboxEnvShape, sandboxOptions } from "./sandbox/config.ts";

/** The service's environment. Each variable is documented in the README's configuration table. */
export const serviceConfigSchema = z
  .object({
    /** TCP port the service listens on. Default 8081. */
    PORT: env.port(8081),
    /** Interface to bind. Default 127.0.0.1: only the gateway should reach it. */
    HOST: z.string().default("127.0.0.1"),
    /** pino log level. Default info. */
    LOG_LEVEL: env.logLevel(),
    /** Redis for service records. Unset: the local redis-server that `pnpm start` runs. */
    REDIS_URL: env.redisUrl(),
    ...spicedbEnvShape,
    ...metricsEnvShape,
    /** Shared secret for the gateway's assertions (at least 32 characters). Unset: the development secret under DATA_DIR. */
    INTERNAL_ASSERTION_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
    /** Directory for local development data. Default .data. */
    DATA_DIR: z.string().default(".data"),
    /** Base URL of an OpenAI-compatible provider (e.g. https://api.openai.com/v1). Unset: responses answer 503. */
    LLM_BASE_URL: z
      .url({ protocol: /^https?$/ })
      .transform((u) => u.replace(/\/+$/, ""))
      .optional(),
    /** API key for the provider, sent as a bearer token. */
    LLM_API_KEY: z.string().optional(),
    /** Model used for `model: "auto"`. */
    LLM_DEFAULT_MODEL: z.string().min(1).optional(),
    /** Comma-separated models callers may ask for; unset: any. */
    LLM_MODELS: z
      .string()
      .transform((v) =>
        v
          .split(",")
          .map((m) => m.trim())
          .filter(Boolean),
      )
      .optional(),
    /** Time allowed for the provider to answer (or between streamed chunks), in milliseconds. Default 60000. */
    LLM_TIMEOUT_MS: env.positiveInt(60_000),
    /** Largest provider answer read: a JSON body, or the text of a streamed answer, in bytes. Default 8388608 (8 MiB). */
    LLM_MAX_RESPONSE_BYTES: env.positiveInt(8 * 1024 * 1024),
    /** Largest single event of a provider's stream, in characters. Default 1048576. */
    LLM_MAX_EVENT_CHARS: env.positiveInt(1024 * 1024),
    /** Earlier conversation items sent to the model with a turn, newest kept. Default 100. */
    LLM_CONTEXT_MAX_ITEMS: env.positiveInt(100),
    /** Estimated tokens (four characters each) of a whole prompt: instructions, new input, earlier items. Default 32000. */
    LLM_CONTEXT_MAX_TOKENS: env.positiveInt(32_000),
    /** Eval runs this process works on at a time; 0: none (separate workers run them). Default 2. */
    EVAL_WORKER_CONCURRENCY: z.coerce.number().int().min(0).max(100).default(2),
    ...sandboxEnvShape,
  })
  .superRefine((c, ctx) => checkSpiceDBEnv(c, ctx))
  .superRefine((c, ctx) => checkSandboxEnv(c, ctx))
  .transform((c) => ({
    ...c,
    REDIS_URL: c.REDIS_URL ?? localRedisUrl(),
    spicedb: spicedbClientOptions(c),
    metricsEndpoint: metricsEndpointOf(c),
    sandbox: sandboxOptions(c),
  }));

export type ServiceConfig = z.output<typeof serviceConfigSchema>;
