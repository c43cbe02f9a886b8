import { type Command, Redis, type RedisOptions, ReplyError } from "ioredis";
import { AppError } from "./errors.ts";

/** Default port of the `redis-server` that `pnpm start` runs when `REDIS_URL` is unset. */
export const DEFAULT_LOCAL_REDIS_PORT = 6390;

/** The local redis-server's port: `LOCAL_REDIS_PORT`, else 6390. */
export function localRedisPort(env: NodeJS.ProcessEnv = process.env): number {
  const port = Number(env.LOCAL_REDIS_PORT || DEFAULT_LOCAL_REDIS_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error("LOCAL_REDIS_PORT must be a TCP port");
  return port;
}

/** Where the gateway, the service and `pnpm keys` find Redis when `REDIS_URL` is unset. */
export function localRedisUrl(env: NodeJS.ProcessEnv = process.env): string {
  return `redis://127.0.0.1:${localRedisPort(env)}`;
}

export interface RedisClientOptions {
  /** Shown in `CLIENT LIST`, so an operator can tell the connections apart. */
  connectionName: string;
  /** Per-command timeout in milliseconds; a hung Redis must not hang requests. */
  commandTimeoutMs?: number;
  extra?: RedisOptions;
}

/** Redis could not be asked (connection lost, command timed out): a 503, whoever asked. */
export class RedisUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "The data store is unavailable; try again", { cause });
    this.name = "RedisUnavailable";
  }
}

/** Our `reject` wrappers: a command may pass through `sendCommand` (and get a new promise) more than once. */
const guards = new WeakSet<Command["reject"]>();

/**
 * ioredis whose commands fail with `RedisUnavailable` when Redis could not
 * answer, so an outage is a 503 wherever it strikes; Redis's own error
 * replies (`ReplyError`) are bugs of ours and pass unchanged.
 */
class GuardedRedis extends Redis {
  override sendCommand(command: Command, ...rest: unknown[]): unknown {
    if (!guards.has(command.reject)) {
      const reject = command.reject;
      command.reject = (err) => reject(err instanceof ReplyError ? err : new RedisUnavailable(err));
      guards.add(command.reject);
    }
    return (super.sendCommand as (command: Command, ...rest: unknown[]) => unknown)(command, ...rest);
  }
}

export function createRedis(url: string, options: RedisClientOptions): Redis {
  return new GuardedRedis(url, {
    connectionName: options.connectionName,
    commandTimeout: options.commandTimeoutMs ?? 2_000,
    connectTimeout: 5_000,
    // Fail fast instead of queueing forever while Redis is away; callers decide what a failure means.
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
    ...options.extra,
  });
}

/** PING with a deadline: the readiness probe. */
export async function redisReady(redis: Redis, timeoutMs = 1_000): Promise<boolean> {
  try {
    const pong = await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("timeout")), timeoutMs).unref()),
    ]);
    return pong === "PONG";
  } catch {
    return false;
  }
}
