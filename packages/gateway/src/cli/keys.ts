/**
 * `pnpm keys <command>`: API-key administration straight against Redis
 * (`REDIS_URL`, else the local redis-server of `pnpm start`). Every command
 * prints exactly one JSON document on stdout; problems go to stderr with a
 * non-zero exit code.
 */
import { parseArgs } from "node:util";
import { systemClock } from "@gw/core/clock";
import { ValidationFailed } from "@gw/core/errors";
import { type Limits, SPEND_WINDOWS, TOKEN_WINDOWS, WINDOWS } from "@gw/core/limits";
import { redactUrl } from "@gw/core/logger";
import { PERMISSIONS } from "@gw/core/permissions";
import { createRedis, localRedisUrl, type RedisClient } from "@gw/core/redis";
import { keyUsageByDeployment, utcDay } from "@gw/core/usage-days";
import { validate } from "@gw/core/validation";
import { CountingWindows } from "@gw/core/windows";
import { keyUsage } from "../api-keys/key-usage.ts";
import { OrgLimitsStore } from "../api-keys/org-limits.ts";
import {
  createApiKeySchema,
  endUserLimitsPatchSchema,
  keyUsageQuery,
  updateApiKeySchema,
} from "../api-keys/schema.ts";
import { ApiKeyStore, listedKeys } from "../api-keys/store.ts";
import { type ApiKeyRecord, toView } from "../api-keys/types.ts";
import { limitsList } from "../config.ts";
import { generateSigningJwk } from "../tokens/signing-keys.ts";

const USAGE = `usage:
  pnpm keys create --org ORG --owner USER [--name N] [--permissions a,b|all] [--models a,b] [--limit LIMIT=N]... [--expires-at ISO8601] [--on-behalf-of POLICY] [--cache off|principal|key]
  pnpm keys list --org ORG
  pnpm keys get ID
  pnpm keys update ID [--name N] [--permissions a,b] [--models a,b|any] [--limit LIMIT=N|off]... [--expires-at ISO8601|never] [--on-behalf-of POLICY] [--cache off|principal|key]
  pnpm keys revoke ID
  pnpm keys usage ID [--user U]   (every window of every unit of the key, and with --user of that end user;
    and the key's calls this UTC month by model and the deployment that served them)
  pnpm keys end-user-limits --org ORG [--limit LIMIT=N|off]...   (the organization's defaults for end users)
  pnpm keys signing-key [--alg ES256|EdDSA]   (a new JWT signing key, as a JWK Set for JWT_SIGNING_KEYS)
LIMIT is [end-user:][UNIT:]WINDOW: requests per ${WINDOWS.join(", ")} (UNIT requests, or none);
tokens:${TOKEN_WINDOWS.join("|")}; spend:${SPEND_WINDOWS.join("|")} in US dollars (spend:month=50.5).
end-user: limits each end user of the key (X-On-Behalf-Of, else the owner).
POLICY (the end users the key and its tokens may act for; default any): any | none (its owner only) |
  prefix:P and user:U entries, comma-separated (users whose id starts with P; the user U, who may own a
  key of the organization, which any and prefixes never admit; neither can hold a comma here).
--cache: the key's response cache (default off): principal shares answers only with the same principal,
  key also across its principals for requests that read nothing stored.`;

class UsageError extends Error {}

/** Where a command line prints: `process`, or a test's own. */
export interface CliOutput {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

const OPTIONS = {
  org: { type: "string" },
  owner: { type: "string" },
  name: { type: "string" },
  permissions: { type: "string" },
  models: { type: "string" },
  limit: { type: "string", multiple: true },
  "expires-at": { type: "string" },
  "on-behalf-of": { type: "string" },
  cache: { type: "string" },
  alg: { type: "string" },
  user: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/**
 * `--limit second=5 --limit tokens:minute=100000 --limit spend:month=50
 * --limit end-user:tokens:day=off` → `{second: 5, tokens: {minute: 100000},
 * spend: {month: 50}, endUser: {tokens: {day: null}}}`; values are checked
 * later by the schema.
 */
function parseLimits(values: string[] | undefined, allowOff: boolean): Record<string, unknown> | undefined {
  if (!values) return undefined;
  const limits: Record<string, unknown> = {};
  for (const value of values) {
    const [name, amount, ...rest] = value.split("=");
    if (!name || amount === undefined || rest.length > 0)
      throw new UsageError(`--limit expects [end-user:][UNIT:]WINDOW=N, got '${value}'`);
    const path = name.split(":");
    const within = (parent: Record<string, unknown>, field: string) => {
      parent[field] ??= {};
      return parent[field] as Record<string, unknown>;
    };
    let target = limits;
    if (path[0] === "end-user") {
      path.shift();
      target = within(limits, "endUser");
    }
    if (path[0] === "requests") path.shift();
    if (path.length === 2 && (path[0] === "tokens" || path[0] === "spend")) {
      target = within(target, path[0]);
      path.shift();
    }
    if (path.length !== 1 || !path[0])
      throw new UsageError(`--limit expects [end-user:][UNIT:]WINDOW=N, got '${value}'`);
    if (allowOff && amount === "off") target[path[0]] = null;
    else target[path[0]] = /^-?\d+(\.\d+)?$/.test(amount) ? Number(amount) : amount;
  }
  return limits;
}

/** `any`, `none` or `prefix:acme-,user:alice` → the admin API's form; values are checked later by the schema. */
function parseOnBehalfOf(value: string | undefined): unknown {
  if (value === undefined || value === "any" || value === "none") return value;
  const policy: { prefixes?: string[]; users?: string[] } = {};
  for (const part of value.split(",")) {
    const kind = part.startsWith("prefix:") ? "prefixes" : part.startsWith("user:") ? "users" : undefined;
    if (kind === undefined) {
      throw new UsageError(
        `--on-behalf-of expects any, none or prefix:P and user:U entries, comma-separated, got '${value}'`,
      );
    }
    policy[kind] = [...(policy[kind] ?? []), part.slice(part.indexOf(":") + 1)];
  }
  return policy;
}

/** A comma-separated list (`--permissions`, `--models`). */
function parseList(value: string | undefined): string[] | undefined {
  return value === undefined
    ? undefined
    : value
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean);
}

/** Runs one CLI command; returns what to print. Exported for tests. */
export async function runKeysCommand(
  argv: string[],
  store: ApiKeyStore,
  limiter?: Pick<CountingWindows, "peek">,
  orgLimits?: OrgLimitsStore,
  usage?: RedisClient,
  /** `DEFAULT_LIMITS`: the request windows of a key without its own, which `usage` shows as the gateway counts them. */
  defaultLimits: Limits = {},
): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  const [command, id, ...extra] = positionals;
  if (values.help || !command) throw new UsageError("");
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`);
  const needId = () => {
    if (!id) throw new UsageError(`${command} needs a key id`);
    return id;
  };
  // As the admin API shows a key: its status as authentication would see it now.
  const view = (record: ApiKeyRecord) => toView(record, systemClock.wall());
  // As the admin API lists keys: each with when it last authenticated a request, or null.
  const withLastUse = (records: ApiKeyRecord[]) => listedKeys(store, records, systemClock.wall());
  const found = <T>(record: T | undefined): T => {
    if (!record) throw new Error(`no API key ${id}`);
    return record;
  };
  switch (command) {
    case "create": {
      const input = validate("body", createApiKeySchema, {
        org: values.org,
        owner: values.owner,
        name: values.name,
        permissions: values.permissions === "all" ? [...PERMISSIONS] : parseList(values.permissions),
        models: parseList(values.models),
        limits: parseLimits(values.limit, false),
        expiresAt: values["expires-at"],
        onBehalfOf: parseOnBehalfOf(values["on-behalf-of"]),
        cache: values.cache,
      });
      const { record, secret } = await store.create(input);
      return { ...view(record), key: secret };
    }
    case "list": {
      if (!values.org) throw new UsageError("list needs --org");
      return withLastUse(await store.listByOrg(values.org));
    }
    case "get":
      return (await withLastUse([found(await store.get(needId()))]))[0];
    case "update": {
      const key = needId();
      const expires = values["expires-at"];
      const patch = validate("body", updateApiKeySchema, {
        name: values.name,
        permissions: values.permissions === "all" ? [...PERMISSIONS] : parseList(values.permissions),
        models: values.models === "any" ? null : parseList(values.models),
        limits: parseLimits(values.limit, true),
        expiresAt: expires === "never" ? null : expires,
        onBehalfOf: parseOnBehalfOf(values["on-behalf-of"]),
        cache: values.cache,
      });
      return view(found(await store.update(key, patch)));
    }
    case "revoke":
      return view(found(await store.revoke(needId())));
    case "usage": {
      const key = found(await store.get(needId()));
      if (!limiter || !orgLimits) throw new Error("usage needs the rate-limit store");
      const { user } = validate("query", keyUsageQuery, { user: values.user });
      const windows = await keyUsage(limiter, orgLimits, key, user, defaultLimits);
      if (!usage) return windows;
      const to = utcDay(new Date());
      const from = `${to.slice(0, 8)}01`;
      return {
        ...windows,
        served: { from, to, models: await keyUsageByDeployment(usage, key.org, key.id, from, to) },
      };
    }
    case "end-user-limits": {
      if (!values.org) throw new UsageError("end-user-limits needs --org");
      if (!orgLimits) throw new Error("end-user-limits needs the store");
      if (id) throw new UsageError(`unexpected argument: ${id}`);
      const parsed = parseLimits(values.limit, true);
      if (!parsed) return { org: values.org, endUser: await orgLimits.get(values.org) };
      const { endUser, ...own } = parsed;
      const patch = validate("body", endUserLimitsPatchSchema, { ...own, ...(endUser as object) });
      return { org: values.org, endUser: await orgLimits.update(values.org, patch) };
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/** `--help`: the usage on stdout, exit 0. */
const HELP = Symbol("help");

/** What needs no Redis: `--help`, a missing command, `signing-key`. */
async function offline(argv: string[]): Promise<unknown | undefined> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return HELP;
  if (!positionals[0]) throw new UsageError("");
  if (positionals[0] !== "signing-key") return undefined;
  const alg = values.alg ?? "ES256";
  if (alg !== "ES256" && alg !== "EdDSA") throw new UsageError("--alg must be ES256 or EdDSA");
  return { keys: [await generateSigningJwk(alg)] };
}

/**
 * The command line: `argv` without node and the script, `env` for `REDIS_URL`;
 * writes to `io` and returns the exit code. Tests pass their own to run it in process.
 */
export async function main(
  argv: string[] = process.argv.slice(2),
  env: NodeJS.ProcessEnv = process.env,
  io: CliOutput = process,
): Promise<number> {
  try {
    const result = await offline(argv);
    if (result === HELP) {
      io.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (result !== undefined) {
      io.stdout.write(`${JSON.stringify(result)}\n`);
      return 0;
    }
  } catch (err) {
    if (!(err instanceof UsageError) && !(err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS"))
      throw err;
    io.stderr.write(`${(err as Error).message ? `error: ${(err as Error).message}\n` : ""}${USAGE}\n`);
    return 2;
  }
  const url = env.REDIS_URL || localRedisUrl(env);
  const redis = createRedis(url, {
    connectionName: "keys-cli",
    extra: { lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false },
  });
  redis.on("error", () => {});
  try {
    try {
      await redis.connect();
    } catch (err) {
      io.stderr.write(
        `error: cannot reach Redis at ${redactUrl(url)} (${(err as Error).message}). Start the stack with 'pnpm start' or set REDIS_URL.\n`,
      );
      return 1;
    }
    const defaults = limitsList.safeParse(env.DEFAULT_LIMITS ?? "");
    if (!defaults.success) {
      io.stderr.write(`error: DEFAULT_LIMITS: ${defaults.error.issues[0]?.message}\n`);
      return 78;
    }
    const result = await runKeysCommand(
      argv,
      new ApiKeyStore(redis),
      new CountingWindows(redis),
      new OrgLimitsStore(redis),
      redis,
      defaults.data,
    );
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`${err.message ? `error: ${err.message}\n` : ""}${USAGE}\n`);
      return 2;
    }
    if (err instanceof ValidationFailed) {
      for (const issue of err.issues)
        io.stderr.write(`error: ${issue.loc.slice(1).join(".")}: ${issue.msg}\n`);
      return 2;
    }
    if ((err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      io.stderr.write(`error: ${(err as Error).message}\n${USAGE}\n`);
      return 2;
    }
    io.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  } finally {
    redis.disconnect();
  }
}

if (import.meta.main) process.exitCode = await main();
