import type { Writable } from "node:stream";
import { Cluster, type ClusterOptions, type Command, Redis, type RedisOptions, ReplyError } from "ioredis";
import { withDeadline } from "./deadline.ts";
import { AppError } from "./errors.ts";
import { endSpan, startClientSpan, tracingEnabled } from "./tracing.ts";

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

/**
 * What every caller gets from `createRedis`: one Redis server or a Redis
 * Cluster, with the same commands. Keys a command, script or transaction
 * touches together must share a hash tag (`{…}`), so they live on one slot.
 */
export type RedisClient = Redis | Cluster;

/** Where command latency and errors go (see `createMetrics`); one per process. */
export interface RedisCommandObserver {
  /** A new connection: its error counts start at 0. */
  track(client: string): void;
  /** Called once per command, when it settles; `error` tells an outage from Redis's own error reply. */
  observe(client: string, command: string, seconds: number, error?: "unavailable" | "reply"): void;
}

export interface RedisClientOptions {
  /** Shown in `CLIENT LIST`, so an operator can tell the connections apart; also the `client` metric label. */
  connectionName: string;
  /** Per-command timeout in milliseconds; a hung Redis must not hang requests. */
  commandTimeoutMs?: number;
  /** Command latency and errors. */
  metrics?: RedisCommandObserver;
  /**
   * Keep ioredis's own errors instead of `RedisUnavailable`: for libraries
   * (BullMQ) that read them to recover from a closed connection.
   */
  rawErrors?: boolean;
  extra?: RedisOptions;
}

/** Redis could not be asked (connection lost, command timed out): a 503, whoever asked. */
export class RedisUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "The data store is unavailable; try again", {
      cause,
      reason: "data_store_unavailable",
    });
    this.name = "RedisUnavailable";
  }
}

/** Error replies that mean the cluster cannot answer right now, not that we asked wrong. */
const UNAVAILABLE_REPLY = /^(CLUSTERDOWN|TRYAGAIN|MASTERDOWN|LOADING)\b/;

/** Whether an error says Redis could not answer (rather than refusing what was asked: a bug of ours). */
function isOutage(err: unknown): boolean {
  return !(err instanceof ReplyError) || UNAVAILABLE_REPLY.test((err as Error).message);
}

/**
 * Commands ioredis sends by itself after a reconnect (`autoResubscribe`, the database it had
 * selected) without a handler: closed while one is unanswered, it would reject with no one to hear
 * it, an unhandled rejection in a process that is only shutting down. Marked handled here; a caller
 * that sent one itself still gets its rejection.
 */
const RESENT_ON_RECONNECT = new Set(["subscribe", "psubscribe", "ssubscribe", "select"]);

/** Our `reject` wrappers: a command may pass through `sendCommand` (and get a new promise) more than once. */
const wrapped = new WeakSet<Command["reject"]>();

/**
 * Wraps a command's settlement once: its latency and errors reach `metrics`,
 * and, unless `rawErrors`, an outage rejects with `RedisUnavailable`, so it
 * is a 503 wherever it strikes. Redis's own error replies pass unchanged.
 * What ioredis resends by itself after a reconnect is marked handled (`RESENT_ON_RECONNECT`).
 */
function guard(command: Command, options: RedisClientOptions): void {
  if (wrapped.has(command.reject)) return;
  const { resolve, reject } = command;
  const metrics = options.metrics;
  const started = metrics ? process.hrtime.bigint() : 0n;
  // A span per command when tracing is on (the command's name only: keys and values stay out).
  const span = tracingEnabled()
    ? startClientSpan(`Redis ${command.name}`, {
        "db.system.name": "redis",
        "db.operation.name": command.name,
        "gw.redis.connection": options.connectionName,
      })
    : undefined;
  const observe = (error?: "unavailable" | "reply") => {
    endSpan(span, error);
    metrics?.observe(
      options.connectionName,
      command.name,
      Number(process.hrtime.bigint() - started) / 1e9,
      error,
    );
  };
  if (metrics || span) {
    command.resolve = (value) => {
      observe();
      resolve(value);
    };
  }
  command.reject = (err) => {
    const outage = isOutage(err);
    observe(outage ? "unavailable" : "reply");
    reject(outage && !options.rawErrors ? new RedisUnavailable(err) : err);
  };
  wrapped.add(command.reject);
  if (RESENT_ON_RECONNECT.has(command.name)) command.promise.catch(() => undefined);
}

type SendCommand = (command: Command, ...rest: unknown[]) => unknown;

class GuardedRedis extends Redis {
  private readonly clientOptions: RedisClientOptions;
  constructor(url: string, options: RedisOptions, clientOptions: RedisClientOptions) {
    super(url, options);
    this.clientOptions = clientOptions;
  }
  override sendCommand(command: Command, ...rest: unknown[]): unknown {
    guard(command, this.clientOptions);
    return (super.sendCommand as SendCommand)(command, ...rest);
  }
}

class GuardedCluster extends Cluster {
  private readonly clientOptions: RedisClientOptions;
  private readonly commandTimeout: number | undefined;
  constructor(
    nodes: { host: string; port: number }[],
    options: ClusterOptions,
    clientOptions: RedisClientOptions,
    commandTimeout: number | undefined,
  ) {
    super(nodes, options);
    this.clientOptions = clientOptions;
    this.commandTimeout = commandTimeout;
  }
  override sendCommand(command: Command, ...rest: unknown[]): unknown {
    guard(command, this.clientOptions);
    // Nodes time out what they were sent; this also covers commands waiting while the cluster is down.
    if (this.commandTimeout !== undefined) command.setTimeout(this.commandTimeout);
    return (super.sendCommand as SendCommand)(command, ...rest);
  }
}

/** `redis+cluster://` and `rediss+cluster://` name a Redis Cluster by some of its nodes. */
const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/?$/;

/** Whether `url` names a Redis Cluster (`redis+cluster://host:port,host:port`). */
export function isClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:\/\//.test(url);
}

/** The seed nodes and credentials of a cluster URL; throws on anything else. */
export function parseClusterUrl(url: string): {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
} {
  const match = CLUSTER_URL.exec(url);
  if (!match) throw new Error("a cluster URL is redis+cluster://[user:password@]host:port[,host:port…]");
  const [, scheme, user, password, hosts] = match;
  const nodes = hosts!.split(",").map((node) => {
    const at = node.lastIndexOf(":");
    const port = Number(node.slice(at + 1));
    if (at <= 0 || !Number.isInteger(port) || port < 1 || port > 65535)
      throw new Error(`'${node}' in a cluster URL is not host:port`);
    return { host: node.slice(0, at).replace(/^\[(.*)\]$/, "$1"), port };
  });
  return {
    nodes,
    ...(user ? { username: decodeURIComponent(user) } : {}),
    ...(password !== undefined ? { password: decodeURIComponent(password) } : {}),
    tls: scheme === "rediss",
  };
}

/**
 * The one Redis factory of every process: `redis://` / `rediss://` for one
 * server, `redis+cluster://host:port,host:port` for a Redis Cluster (the
 * nodes named are where discovery starts). Both get the same deadlines,
 * retries and error mapping.
 */
export function createRedis(url: string, options: RedisClientOptions): RedisClient {
  const settings: RedisOptions = {
    connectionName: options.connectionName,
    commandTimeout: options.commandTimeoutMs ?? 2_000,
    connectTimeout: 5_000,
    // Fail fast instead of queueing forever while Redis is away; callers decide what a failure means.
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
    ...options.extra,
  };
  options.metrics?.track(options.connectionName);
  if (!isClusterUrl(url)) return new GuardedRedis(url, settings, options);

  const { nodes, username, password, tls } = parseClusterUrl(url);
  // The cluster client owns what concerns all nodes; each node's connection gets the rest.
  const {
    enableOfflineQueue,
    enableAutoPipelining,
    lazyConnect,
    retryStrategy,
    readOnly: _,
    ...node
  } = settings;
  return new GuardedCluster(
    nodes,
    {
      enableOfflineQueue: enableOfflineQueue ?? true,
      enableAutoPipelining: enableAutoPipelining ?? false,
      lazyConnect: lazyConnect ?? false,
      clusterRetryStrategy: retryStrategy ?? null,
      // A cluster that lost a master answers CLUSTERDOWN until failover: retry briefly, then fail.
      retryDelayOnClusterDown: 100,
      maxRedirections: 16,
      redisOptions: { ...node, username, password, ...(tls ? { tls: {} } : {}) },
    },
    options,
    settings.commandTimeout,
  );
}

/**
 * Runs `send`, which calls commands without waiting for them, with one
 * server's connection corked: what it sends leaves in one write, where each
 * command was a write (and a wake-up of Redis) of its own. A cluster's
 * commands go to their nodes' connections as they are.
 */
export function sentTogether<T>(redis: unknown, send: () => T): T {
  const stream = redis instanceof Redis ? (redis as unknown as { stream?: Writable }).stream : undefined;
  if (typeof stream?.cork !== "function") return send();
  stream.cork();
  try {
    return send();
  } finally {
    stream.uncork();
  }
}

/**
 * Follows `channel` on a subscriber connection that may carry other channels too: `onMessage` for each
 * of its messages; `onLive` each time a SUBSCRIBE is answered (at first, after a reconnect, and after
 * `resubscribe` when the connection outlived an error); `onLost` when the connection closes or errs,
 * after which whatever was heard before may have missed messages. `isLive` says whether `onLost` came
 * last; `resubscribe` subscribes again while the connection is ready but the channel is not live.
 *
 * On a Redis Cluster the subscription is one node's connection, which ioredis moves to another node
 * (when its connection ends or its node leaves) and subscribes again without telling: what was
 * published meanwhile is lost. Each move is `onLost`, then `onLive` once the channel is subscribed on
 * the new connection (`onClusterSubscriberMoved`).
 *
 * `firstLive(timeoutMs)` resolves at the first `onLive`, or once `timeoutMs` has passed (a caller
 * that starts without the feed); it rejects if the first SUBSCRIBE is refused on a connection that
 * was ready when the channel was followed (Redis answered, and said no: an ACL, say).
 */
export function followChannel(
  subscriber: RedisClient,
  channel: string,
  handlers: {
    onMessage(message: string): void;
    onLive(): void;
    onLost(): void;
    /** Told when a SUBSCRIBE is refused. */
    onRefused(err: Error): void;
  },
): { isLive(): boolean; resubscribe(): void; firstLive(timeoutMs: number): Promise<void> } {
  let live = false;
  const readyAtStart = subscriber.status === "ready";
  let settleFirst: ((err?: Error) => void) | undefined;
  const first = new Promise<void>((resolve, reject) => {
    settleFirst = (err) => {
      settleFirst = undefined;
      if (err && readyAtStart) reject(err);
      else resolve();
    };
  });
  first.catch(() => {});
  subscriber.on("message", (heard: string, message: string) => {
    if (heard === channel) handlers.onMessage(message);
  });
  const lost = () => {
    live = false;
    handlers.onLost();
  };
  subscriber.on("close", lost);
  subscriber.on("error", lost);
  const subscribe = () =>
    void subscriber.subscribe(channel).then(
      () => {
        live = true;
        handlers.onLive();
        settleFirst?.();
      },
      (err: Error) => {
        handlers.onRefused(err);
        settleFirst?.(err);
      },
    );
  subscriber.on("ready", subscribe);
  if (subscriber.status === "ready") subscribe();
  if (subscriber instanceof Cluster)
    onClusterSubscriberMoved(subscriber, () => {
      lost();
      if (subscriber.status === "ready") subscribe();
    });
  return {
    isLive: () => live,
    resubscribe: () => {
      if (!live && subscriber.status === "ready") subscribe();
    },
    firstLive(timeoutMs) {
      // Past the timeout the caller goes on without the feed; a refusal still rejects.
      const late = new Error("not live yet");
      return withDeadline(first, timeoutMs, () => late).catch((err: unknown) => {
        if (err !== late) throw err;
      });
    },
  };
}

/**
 * Calls `moved` each time a cluster client's subscriber connection is chosen anew (ioredis's
 * `ClusterSubscriber.selectSubscriber`: at the start, when the connection ends, when its node leaves),
 * right after the new connection is made and told the channels the old one had. ioredis says nothing
 * of it otherwise; a version whose client has no such method is refused, so that an upgrade cannot
 * silently bring back missed messages (`packages/gateway/src/api-keys/cluster-feed.test.ts`).
 */
function onClusterSubscriberMoved(cluster: Cluster, moved: () => void): void {
  const inner = (cluster as unknown as { subscriber?: { selectSubscriber?: () => void } }).subscriber;
  const select = inner?.selectSubscriber;
  if (!inner || typeof select !== "function")
    throw new Error("This ioredis Cluster has no subscriber to follow: its pub/sub cannot be trusted");
  inner.selectSubscriber = () => {
    select.call(inner);
    moved();
  };
}

/** PING with a deadline: the readiness probe. */
export async function redisReady(redis: RedisClient, timeoutMs = 1_000): Promise<boolean> {
  try {
    const pong = await withDeadline(redis.ping(), timeoutMs, () => new Error("timeout"));
    return pong === "PONG";
  } catch {
    return false;
  }
}
