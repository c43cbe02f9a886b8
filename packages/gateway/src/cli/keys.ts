/**
 * `pnpm keys <command>`: API-key administration straight against Redis
 * (`REDIS_URL`, else the local redis-server of `pnpm start`). Every command
 * prints exactly one JSON document on stdout; problems go to stderr with a
 * non-zero exit code.
 */
import { parseArgs } from "node:util";
import { createRedis, localRedisUrl, redactUrl, ValidationFailed, validate, WINDOWS } from "@gw/core";
import { createApiKeySchema, updateApiKeySchema } from "../api-keys/schema.ts";
import { ApiKeyStore } from "../api-keys/store.ts";
import { toView } from "../api-keys/types.ts";
import { RedisWindows } from "../rate-limit/redis-windows.ts";
import { generateSigningJwk } from "../tokens/signing-keys.ts";

const USAGE = `usage:
  pnpm keys create --org ORG --owner USER [--name N] [--permissions a,b] [--limit WINDOW=N]... [--expires-at ISO8601] [--on-behalf-of POLICY]
  pnpm keys list --org ORG
  pnpm keys get ID
  pnpm keys update ID [--name N] [--permissions a,b] [--limit WINDOW=N|off]... [--expires-at ISO8601|never] [--on-behalf-of POLICY]
  pnpm keys revoke ID
  pnpm keys usage ID      (requests counted in each of the key's rate-limit windows)
  pnpm keys signing-key [--alg ES256|EdDSA]   (a new JWT signing key, as a JWK Set for JWT_SIGNING_KEYS)
WINDOW is one of ${WINDOWS.join(", ")}.
POLICY (the end users the key and its tokens may act for; default any): any | none (its owner only) |
  prefix:P[,prefix:P]... (users whose id starts with one of them; a prefix cannot hold a comma here).`;

class UsageError extends Error {}

const OPTIONS = {
  org: { type: "string" },
  owner: { type: "string" },
  name: { type: "string" },
  permissions: { type: "string" },
  limit: { type: "string", multiple: true },
  "expires-at": { type: "string" },
  "on-behalf-of": { type: "string" },
  alg: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** `--limit second=5 --limit day=off` → `{second: 5, day: null}`; values are checked later by the schema. */
function parseLimits(values: string[] | undefined, allowOff: boolean): Record<string, unknown> | undefined {
  if (!values) return undefined;
  const limits: Record<string, unknown> = {};
  for (const value of values) {
    const [window, amount, ...rest] = value.split("=");
    if (!window || amount === undefined || rest.length > 0)
      throw new UsageError(`--limit expects WINDOW=N, got '${value}'`);
    if (allowOff && amount === "off") limits[window] = null;
    else limits[window] = /^-?\d+$/.test(amount) ? Number(amount) : amount;
  }
  return limits;
}

/** `any`, `none` or `prefix:acme-,prefix:svc-` → the admin API's form; values are checked later by the schema. */
function parseOnBehalfOf(value: string | undefined): unknown {
  if (value === undefined || value === "any" || value === "none") return value;
  const prefixes = value.split(",").map((part) => {
    if (!part.startsWith("prefix:")) {
      throw new UsageError(`--on-behalf-of expects any, none or prefix:P[,prefix:P]..., got '${value}'`);
    }
    return part.slice("prefix:".length);
  });
  return { prefixes };
}

function parsePermissions(value: string | undefined): string[] | undefined {
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
  limiter?: Pick<RedisWindows, "peek">,
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
        permissions: parsePermissions(values.permissions),
        limits: parseLimits(values.limit, false),
        expiresAt: values["expires-at"],
        onBehalfOf: parseOnBehalfOf(values["on-behalf-of"]),
      });
      const { record, secret } = await store.create(input);
      return { ...toView(record), key: secret };
    }
    case "list": {
      if (!values.org) throw new UsageError("list needs --org");
      return (await store.listByOrg(values.org)).map(toView);
    }
    case "get":
      return toView(found(await store.get(needId())));
    case "update": {
      const key = needId();
      const expires = values["expires-at"];
      const patch = validate("body", updateApiKeySchema, {
        name: values.name,
        permissions: parsePermissions(values.permissions),
        limits: parseLimits(values.limit, true),
        expiresAt: expires === "never" ? null : expires,
        onBehalfOf: parseOnBehalfOf(values["on-behalf-of"]),
      });
      return toView(found(await store.update(key, patch)));
    }
    case "revoke":
      return toView(found(await store.revoke(needId())));
    case "usage": {
      const key = found(await store.get(needId()));
      if (!limiter) throw new Error("usage needs the rate-limit store");
      const windows = await limiter.peek(key.id, key.limits);
      return {
        id: key.id,
        windows: windows.map((w) => ({
          window: w.window,
          limit: w.limit,
          used: w.limit - w.remaining,
          remaining: w.remaining,
          resetsInSeconds: Math.ceil(w.resetMs / 1000),
        })),
      };
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/** Commands that need no Redis. */
async function offline(argv: string[]): Promise<unknown | undefined> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  if (positionals[0] !== "signing-key") return undefined;
  const alg = values.alg ?? "ES256";
  if (alg !== "ES256" && alg !== "EdDSA") throw new UsageError("--alg must be ES256 or EdDSA");
  return { keys: [await generateSigningJwk(alg)] };
}

async function main(): Promise<number> {
  try {
    const result = await offline(process.argv.slice(2));
    if (result !== undefined) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return 0;
    }
  } catch (err) {
    if (!(err instanceof UsageError) && !(err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS"))
      throw err;
    process.stderr.write(`error: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const url = process.env.REDIS_URL || localRedisUrl();
  const redis = createRedis(url, {
    connectionName: "keys-cli",
    extra: { lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false },
  });
  redis.on("error", () => {});
  try {
    try {
      await redis.connect();
    } catch (err) {
      process.stderr.write(
        `error: cannot reach Redis at ${redactUrl(url)} (${(err as Error).message}). Start the stack with 'pnpm start' or set REDIS_URL.\n`,
      );
      return 1;
    }
    const result = await runKeysCommand(
      process.argv.slice(2),
      new ApiKeyStore(redis),
      new RedisWindows(redis),
    );
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message ? `error: ${err.message}\n` : ""}${USAGE}\n`);
      return 2;
    }
    if (err instanceof ValidationFailed) {
      for (const issue of err.issues)
        process.stderr.write(`error: ${issue.loc.slice(1).join(".")}: ${issue.msg}\n`);
      return 2;
    }
    if ((err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`error: ${(err as Error).message}\n${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  } finally {
    redis.disconnect();
  }
}

if (import.meta.main) process.exitCode = await main();
