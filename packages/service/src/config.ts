import { checkSpiceDBEnv, spicedbClientOptions, spicedbEnvShape } from "@gw/core/authz";
import { ConfigError, env } from "@gw/core/config";
import { metricsEndpointOf, metricsEnvShape } from "@gw/core/http";
import { vaultKeysSchema } from "@gw/core/mcp";
import { localDatabaseUrl } from "@gw/core/postgres";
import { WORKERS_SHUTDOWN_GRACE_DEFAULT } from "@gw/core/process";
import { localRedisUrl } from "@gw/core/redis";
import { tracingEnvShape } from "@gw/core/tracing";
import { z } from "zod";
import { filesEnvShape, filesOptions } from "./files/config.ts";
import { ADAPTER_KINDS } from "./llm/adapters.ts";
import { CatalogueError, loadCatalogueFile, shorthandCatalogue } from "./llm/catalogue.ts";
import { type ModelList, parseModelList } from "./llm/prices.ts";
import { checkSandboxEnv, sandboxEnvShape, sandboxOptions } from "./sandbox/config.ts";

/** The service's environment. Each variable's comment is its entry in docs/configuration.md (`pnpm docs:config`). */
export const serviceConfigSchema = z
  .object({
    /** TCP port the service listens on. Default 8081. */
    PORT: env.port(8081),
    /** Interface to bind. Default 127.0.0.1: only the gateway should reach it. */
    HOST: z.string().default("127.0.0.1"),
    /** pino log level. Default info. */
    LOG_LEVEL: env.logLevel(),
    /** Redis for usage counters, budgets, ZedTokens, locks and the BullMQ eval queue: `redis://` or `rediss://` for one server, `redis+cluster://[user:password@]host:port,host:port…` (`rediss+cluster://` for TLS) for a Redis Cluster, naming some of its nodes. Unset: the local redis-server that `pnpm start` runs (`redis://127.0.0.1:$LOCAL_REDIS_PORT`). */
    REDIS_URL: env.redisUrl(),
    /** PostgreSQL for conversations, responses, chat completions, files, eval records, sandbox records: `postgres://user:password@host:port/database` (the server SpiceDB uses may serve it, from a database and user of its own); missing migrations (`packages/core/migrations`) are applied at start under an advisory lock. Unset: the local PostgreSQL that `pnpm start` runs (`postgres://gateway@127.0.0.1:$LOCAL_POSTGRES_PORT/gateway`). */
    DATABASE_URL: env.databaseUrl(),
    /** PostgreSQL with pgvector 0.8 or later for the vector stores' chunks and their embeddings (`vector_chunks`): `postgres://user:password@host:port/database`, the content database or another server; missing vector migrations (`packages/core/vector-migrations`) are applied before its first use. Unset: DATABASE_URL, which then needs the `vector` extension (`pnpm start` runs a local vector database instead and sets this to it). */
    VECTOR_DATABASE_URL: env.databaseUrl(),
    /** Connections to VECTOR_DATABASE_URL kept at most. Default 10. */
    VECTOR_DATABASE_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000).default(10),
    /** The embedding model vector stores index files with (a name of the model catalogue); its vectors may be up to 2,000 wide. Default text-embedding-3-small. */
    VECTOR_STORE_EMBEDDING_MODEL: z.string().min(1).max(256).default("text-embedding-3-small"),
    /** Files of vector stores this process indexes at a time; 0: none (eval worker processes index them). Default 2. */
    VECTOR_STORE_INGEST_CONCURRENCY: z.coerce.number().int().min(0).max(100).default(2),
    /** How long a stored response (with its input items) or stored chat completion (with its messages) is kept, with a unit (30d, 12h, 5s). Default 30d. */
    RESPONSE_RETENTION: env.duration("30d"),
    /** How long an answer of the response cache is kept (keys with `cache` on), with a unit. Default 1h. */
    RESPONSE_CACHE_TTL: env.duration("1h"),
    /** Bytes the response cache keeps in Redis for one organization at most (its entries' JSON together); past it, the entries that expire first are deleted to make room. Default 67108864 (64 MiB). */
    RESPONSE_CACHE_MAX_BYTES: env.positiveInt(64 * 1024 * 1024),
    /** Largest answer the response cache keeps, in bytes of its JSON (the answer, and a stream's pieces); a larger one is not kept. Default 262144 (256 KiB). */
    RESPONSE_CACHE_MAX_ENTRY_BYTES: env.positiveInt(256 * 1024),
    /** A conversation untouched this long (with a unit) is deleted; unset: conversations stay until deleted. */
    CONVERSATION_IDLE_EXPIRY: env.optionalDuration(),
    /** How often expired content is deleted in the background, with a unit. Default 1m. */
    RETENTION_SWEEP_INTERVAL: env.duration("1m"),
    /** How often the orphan reconciler removes relationships of conversations, responses, completions, files, vector stores and guardrails that have no content, with a unit. Default 5m. */
    ORPHAN_RECONCILE_INTERVAL: env.duration("5m"),
    /** Relationships the orphan reconciler reads (and resources it may delete) per run, at most. Default 1000. */
    ORPHAN_RECONCILE_BATCH: z.coerce.number().int().min(1).max(100_000).default(1_000),
    /** Age under which the orphan reconciler leaves a resource alone (it may still be being created); longer than any model call, with a unit. Default 1h. */
    ORPHAN_RECONCILE_GRACE: env.duration("1h"),
    ...spicedbEnvShape,
    ...metricsEnvShape,
    ...tracingEnvShape,
    /** Shared secret for the gateway's assertions (at least 32 characters). Unset: the development secret under DATA_DIR. */
    INTERNAL_ASSERTION_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
    /** Directory for local development data. Default .data. */
    DATA_DIR: z.string().default(".data"),
    /** Where the service reaches the gateway's MCP proxy for hosted MCP tools of responses; the only origin its MCP client reaches past the address rules. Default http://127.0.0.1:8080. */
    GATEWAY_URL: z
      .url({ protocol: /^https?$/ })
      .transform((u) => u.replace(/\/+$/, ""))
      .default("http://127.0.0.1:8080"),
    /** The gateway's public base URL: a hosted MCP tool's `server_url` must be one of its proxy URLs. Default http://localhost:8080. */
    GATEWAY_PUBLIC_URL: z
      .url({ protocol: /^https?$/ })
      .transform((u) => u.replace(/\/+$/, ""))
      .default("http://localhost:8080"),
    /** Largest answer of the gateway's MCP proxy the service reads for a hosted MCP tool, in bytes; past it the tool call fails. Set it as the gateway's MCP_MAX_ANSWER_BYTES. Default 4194304 (4 MiB). */
    MCP_MAX_ANSWER_BYTES: z.coerce.number().int().min(1_024).max(1_073_741_824).default(4_194_304),
    /** Key-encryption keys of the vault that seals organizations' own provider keys and sandbox users' GitHub connections: the gateway's VAULT_KEYS, the same value (`id:base64,…`, 32 bytes each; the first wraps new secrets, the others still open old ones). Required when NODE_ENV=production; otherwise unset means the development key under DATA_DIR (`pnpm start` gives both processes one). */
    VAULT_KEYS: vaultKeysSchema.optional(),
    /** Lets an organization's own provider key name an http `base_url` or one on a loopback, private or link-local address (development and tests only). Default false. */
    BYOK_ALLOW_PRIVATE_BASE_URLS: env.boolean(false),
    /** The model catalogue, a YAML or JSON file: each model name's deployments (provider, URL, key, upstream model, weight, priority, timeout, price), fallbacks and the routing policy (docs/api/providers.md). Checked at start; unset: the one-deployment shorthand of LLM_BASE_URL, LLM_API_KEY and LLM_MODELS. */
    MODELS_FILE: z.string().min(1).optional(),
    /** Base URL of an OpenAI-compatible provider (e.g. https://api.openai.com/v1): the one-deployment shorthand of a catalogue, serving LLM_DEFAULT_MODEL and LLM_MODELS. Unset (and no MODELS_FILE): model calls answer 503 (`pnpm start` then runs its development model provider and sets this to it). */
    LLM_BASE_URL: z
      .url({ protocol: /^https?$/ })
      .transform((u) => u.replace(/\/+$/, ""))
      .optional(),
    /** API key for the provider, sent as a bearer token. */
    LLM_API_KEY: z.string().optional(),
    /** Model used for `model: "auto"`; with MODELS_FILE, one of its names (unset: the file's first). */
    LLM_DEFAULT_MODEL: z.string().min(1).optional(),
    /** Comma-separated models callers may ask for, each optionally priced `MODEL=INPUT/CACHED/OUTPUT` (USD per million tokens); unset: any, unpriced. */
    LLM_MODELS: z
      .string()
      .transform((v, ctx) => {
        try {
          return parseModelList(v);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
          return z.NEVER;
        }
      })
      .optional(),
    /** `true`: LLM_BASE_URL is the development model provider that `pnpm start` runs (it sets this), so the shorthand's models are listed as `owned_by: development`. Refused with NODE_ENV=production. Default false. */
    LLM_DEVELOPMENT_PROVIDER: env.boolean(false),
    /** Output tokens reserved (and sent as the cap) for a model call of a key with budgets that names no max_output_tokens. Default 4096. */
    LLM_DEFAULT_MAX_OUTPUT_TOKENS: env.positiveInt(4096),
    /** Time allowed for the provider to answer (or between streamed chunks), in milliseconds: the shorthand's deployment, and a catalogue deployment without `timeout_ms`. Default 60000. */
    LLM_TIMEOUT_MS: env.positiveInt(60_000),
    /** A model call's one deadline, in milliseconds: every attempt, retry pause and fallback until its answer begins (a JSON answer: until it is read) falls within it. Default 120000. */
    LLM_DEADLINE_MS: env.positiveInt(120_000),
    /** Longest pause before a call's first retry on another deployment, in milliseconds, doubled for each retry after it; each pause is drawn at random below it (full jitter). 0: no pause. Default 100. */
    LLM_RETRY_BACKOFF_MS: z.coerce.number().int().min(0).max(60_000).default(100),
    /** Longest cooldown a provider's `Retry-After` starts for its deployment, in seconds (a 429 asking for longer cools it down this long). Default 60. */
    LLM_RETRY_AFTER_MAX_S: z.coerce.number().int().min(1).max(86_400).default(60),
    /** Largest provider answer read: a JSON body, or the text of a streamed answer, in bytes. Default 8388608 (8 MiB). */
    LLM_MAX_RESPONSE_BYTES: env.positiveInt(8 * 1024 * 1024),
    /** Largest embeddings answer read from a provider (a batch of vectors, asked for in base64), in bytes: 2,048 vectors of 3,072 dimensions take about 34 MB. Default 67108864 (64 MiB). */
    LLM_MAX_EMBEDDINGS_RESPONSE_BYTES: env.positiveInt(64 * 1024 * 1024),
    /** Characters of a streamed answer held back until the output guardrails have checked what follows them (longer matches can reach the client); adds about this many characters of latency to the first text. Default 128. */
    GUARDRAIL_STREAM_HOLDBACK_CHARS: z.coerce.number().int().min(1).max(65536).default(128),
    /** Time allowed for the model judge of a `prompt_injection` check (`judge_model`) to answer, in milliseconds; past it the judge gave no verdict (a `block` guardrail then refuses the call with 503). Default 10000. */
    GUARDRAIL_JUDGE_TIMEOUT_MS: env.positiveInt(10_000),
    /** Largest single event of a provider's stream, in characters. Default 1048576. */
    LLM_MAX_EVENT_CHARS: env.positiveInt(1024 * 1024),
    /** Worker threads that count the tokens of large prompts (budgets' reservations, `POST /responses/input_tokens`) off the event loop; 0: every prompt is counted on the event loop, in slices. Default 1. */
    TOKEN_COUNT_WORKERS: z.coerce.number().int().min(0).max(64).default(1),
    /** Prompts of at least this many characters are counted by a worker thread; smaller ones on the event loop. Default 32768. */
    TOKEN_COUNT_WORKER_MIN_CHARS: env.positiveInt(32 * 1024),
    /** Longest a prompt's count may wait for a worker thread and run there, in milliseconds; past it the request answers 503. Default 10000. */
    TOKEN_COUNT_TIMEOUT_MS: env.positiveInt(10_000),
    /** Earlier conversation items sent to the model with a turn, newest kept. Default 100. */
    LLM_CONTEXT_MAX_ITEMS: env.positiveInt(100),
    /** Estimated tokens (four characters each) of a whole prompt: instructions, new input, earlier items. Default 32000. */
    LLM_CONTEXT_MAX_TOKENS: env.positiveInt(32_000),
    /** Eval runs this process works on at a time; 0: none (separate workers run them). Default 2. */
    EVAL_WORKER_CONCURRENCY: z.coerce.number().int().min(0).max(100).default(2),
    /** Live eval schedules one organization may have; creating more is a 409. Default 100. */
    EVAL_MAX_SCHEDULES_PER_ORG: z.coerce.number().int().min(1).max(100_000).default(100),
    /** Smallest period of an eval schedule, in seconds (`every_seconds`, and a cron's firings within a day). Default 60. */
    EVAL_MIN_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
    /** How long eval runs are kept after they were queued, a duration with its unit. Default 90d. */
    EVAL_RUN_RETENTION: env.duration("90d"),
    /** The newest runs kept per eval schedule; older ones go first. Default 1000. */
    EVAL_RUNS_PER_SCHEDULE: z.coerce.number().int().min(1).max(1_000_000).default(1_000),
    /** Background responses (`background: true`) this process (a service or an eval worker process) runs at a time; 0: none (other processes of the stack run them). Default 8. */
    BACKGROUND_RESPONSE_CONCURRENCY: z.coerce.number().int().min(0).max(1_000).default(8),
    /** Background responses one API key may have queued or in progress; past it, 429 `background_limit_exceeded`. Default 100. */
    BACKGROUND_RESPONSES_PER_KEY: z.coerce.number().int().min(1).max(100_000).default(100),
    /** On shutdown (SIGTERM, Ctrl-C), how long the process's workers let the background responses, eval runs and vector-store ingestions they run finish before they end them (a background response then ends `failed`, saying the service stopped), a duration with its unit; a deployment's termination grace period should be longer (`pnpm start` waits this and 5 s more). Default 10s. */
    WORKERS_SHUTDOWN_GRACE: env.duration(WORKERS_SHUTDOWN_GRACE_DEFAULT),
    /** How long a background response stays taken by a worker that stopped renewing it (killed) before another worker ends it failed, a duration with its unit; it ends within about twice this (40 s by default, inside the minute a killed run may take). Default 20s. */
    BACKGROUND_RESPONSE_STALL_TIMEOUT: env.duration("20s"),
    /** How long a background response's stream events are kept after its last one, for `GET /responses/{id}?stream=true`, a duration with its unit. Default 1h. */
    BACKGROUND_RESPONSE_EVENTS_TTL: env.duration("1h"),
    /** Stream events kept per background response, about (the oldest go first). Default 10000. */
    BACKGROUND_RESPONSE_MAX_EVENTS: z.coerce.number().int().min(100).max(1_000_000).default(10_000),
    ...sandboxEnvShape,
    ...filesEnvShape,
  })
  .superRefine((c, ctx) => checkSpiceDBEnv(c, ctx))
  .superRefine((c, ctx) => checkSandboxEnv(c, ctx))
  .superRefine((c, ctx) => {
    for (const name of ["LLM_BASE_URL", "LLM_API_KEY", "LLM_MODELS"] as const)
      if (c.MODELS_FILE && c[name] !== undefined)
        ctx.addIssue({
          code: "custom",
          path: [name],
          message: "MODELS_FILE is set: the catalogue names every deployment (set one or the other)",
        });
  })
  .transform((c, ctx) => ({
    ...c,
    catalogue: catalogueOf(c, ctx),
    REDIS_URL: c.REDIS_URL ?? localRedisUrl(),
    DATABASE_URL: c.DATABASE_URL ?? localDatabaseUrl(),
    VECTOR_DATABASE_URL: c.VECTOR_DATABASE_URL ?? c.DATABASE_URL ?? localDatabaseUrl(),
    spicedb: spicedbClientOptions(c),
    metricsEndpoint: metricsEndpointOf(c),
    sandbox: sandboxOptions(c),
    files: filesOptions(c),
    tokenCounting: {
      workers: c.TOKEN_COUNT_WORKERS,
      workerMinChars: c.TOKEN_COUNT_WORKER_MIN_CHARS,
      timeoutMs: c.TOKEN_COUNT_TIMEOUT_MS,
    },
    retention: {
      responseRetentionMs: c.RESPONSE_RETENTION,
      conversationIdleExpiryMs: c.CONVERSATION_IDLE_EXPIRY,
      sweepIntervalMs: c.RETENTION_SWEEP_INTERVAL,
      // The local engine reads one resource's relationships by scanning its whole type.
      readWholeTypes: !c.SPICEDB_ENDPOINT,
    },
    reconcile: {
      intervalMs: c.ORPHAN_RECONCILE_INTERVAL,
      batch: c.ORPHAN_RECONCILE_BATCH,
      graceMs: c.ORPHAN_RECONCILE_GRACE,
    },
  }));

export type ServiceConfig = z.output<typeof serviceConfigSchema>;

/**
 * What production (`NODE_ENV=production`) refuses to start with, which one
 * schema over the service's variables cannot see: the development model
 * provider of `pnpm start`, which only echoes. Every entry point calls it.
 */
export function refuseDevelopmentSettings(config: ServiceConfig, nodeEnv = process.env.NODE_ENV): void {
  if (nodeEnv === "production" && config.LLM_DEVELOPMENT_PROVIDER)
    throw new ConfigError([
      "LLM_DEVELOPMENT_PROVIDER: not allowed with NODE_ENV=production: it names the development model provider of `pnpm start`; set LLM_BASE_URL to a model provider",
    ]);
}

/** `MODELS_FILE`'s catalogue (a bad file is a configuration error naming the file and the field), else the shorthand's. */
function catalogueOf(
  c: {
    MODELS_FILE?: string | undefined;
    LLM_BASE_URL?: string | undefined;
    LLM_API_KEY?: string | undefined;
    LLM_DEFAULT_MODEL?: string | undefined;
    LLM_MODELS?: ModelList | undefined;
    LLM_TIMEOUT_MS: number;
    LLM_DEVELOPMENT_PROVIDER: boolean;
  },
  ctx: z.RefinementCtx,
) {
  if (!c.MODELS_FILE)
    return shorthandCatalogue({
      baseUrl: c.LLM_BASE_URL,
      apiKey: c.LLM_API_KEY,
      defaultModel: c.LLM_DEFAULT_MODEL,
      models: c.LLM_MODELS,
      timeoutMs: c.LLM_TIMEOUT_MS,
      development: c.LLM_DEVELOPMENT_PROVIDER,
    });
  try {
    return loadCatalogueFile(c.MODELS_FILE, {
      // Keys named `env:NAME` are read from the process's environment, as the file is read from its disk.
      env: process.env,
      production: process.env.NODE_ENV === "production",
      defaultTimeoutMs: c.LLM_TIMEOUT_MS,
      defaultModel: c.LLM_DEFAULT_MODEL,
      kinds: ADAPTER_KINDS,
    });
  } catch (err) {
    if (!(err instanceof CatalogueError)) throw err;
    for (const message of err.problems) ctx.addIssue({ code: "custom", path: ["MODELS_FILE"], message });
    return z.NEVER;
  }
}
