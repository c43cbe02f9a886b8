/**
 * `pnpm authz <command>`: read-only views of the authorization data for
 * operators, straight against SpiceDB (`SPICEDB_*`, else the local server of
 * `pnpm start`), Redis (`REDIS_URL`, else the local redis-server) and, for the
 * audit trail, PostgreSQL (`DATABASE_URL`, else the local server). Every
 * command prints one JSON document on stdout; problems go to stderr with a
 * non-zero exit code (2 for bad usage).
 */
import { parseArgs } from "node:util";
import { AUDIT_CURSOR, AuditLog } from "@gw/core/audit";
import {
  checkSpiceDBEnv,
  connectAuthorization,
  RESOURCE_TYPES,
  type ResourceType,
  spicedbClientOptions,
  spicedbEnvShape,
} from "@gw/core/authz";
import { ConfigError, env, loadConfig } from "@gw/core/config";
import { createLogger, redactUrl } from "@gw/core/logger";
import { createPostgres, localDatabaseUrl } from "@gw/core/postgres";
import { orgIdSchema } from "@gw/core/principal";
import { createRedis, localRedisUrl } from "@gw/core/redis";
import { z } from "zod";
import type { CliOutput } from "./keys.ts";

const USAGE = `usage:
  pnpm authz grants TYPE ORG/ID                     who holds which role on a resource
  pnpm authz audit --org ORG [--resource TYPE/ID] [--limit N] [--cursor C]
                                                    the audit trail, newest first
TYPE is one of ${RESOURCE_TYPES.join(", ")}.`;

class UsageError extends Error {}

const configSchema = z
  .object({
    REDIS_URL: env.redisUrl(),
    DATABASE_URL: env.databaseUrl(),
    // Records past it are left out, as the API leaves them out.
    AUDIT_RETENTION: env.duration("400d"),
    ...spicedbEnvShape,
    LOG_LEVEL: env.logLevel(),
  })
  .superRefine((c, ctx) => checkSpiceDBEnv(c, ctx))
  .transform((c) => ({
    ...c,
    REDIS_URL: c.REDIS_URL ?? localRedisUrl(),
    DATABASE_URL: c.DATABASE_URL ?? localDatabaseUrl(),
    spicedb: spicedbClientOptions(c),
  }));

function resourceType(value: string | undefined): ResourceType {
  if (!RESOURCE_TYPES.includes(value as ResourceType))
    throw new UsageError(`unknown resource type '${value}'`);
  return value as ResourceType;
}

/** `ORG/ID` (the id may hold further slashes). */
function scopedResource(value: string | undefined): { org: string; id: string } {
  const slash = value?.indexOf("/") ?? -1;
  const org = value?.slice(0, slash) ?? "";
  const id = value?.slice(slash + 1) ?? "";
  if (slash < 1 || !id || !orgIdSchema.safeParse(org).success)
    throw new UsageError(`expected ORG/ID, got '${value}'`);
  return { org, id };
}

/**
 * The command line: `argv` without node and the script, `environment` for the settings;
 * writes to `io` and returns the exit code. Tests pass their own to run it in process.
 */
export async function main(
  argv: string[],
  environment: NodeJS.ProcessEnv = process.env,
  io: CliOutput = process,
): Promise<number> {
  // `--help` (or `-h`): the usage on stdout, exit 0, before anything else is read.
  if (argv.includes("--help") || argv.includes("-h")) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let parsed: ReturnType<typeof parse>;
  let config: z.output<typeof configSchema>;
  try {
    parsed = parse(argv);
    config = loadConfig(configSchema, environment);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      io.stderr.write(`error: ${(err as Error).message}\n${USAGE}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const redis = createRedis(config.REDIS_URL, {
    connectionName: "authz-cli",
    extra: { lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false },
  });
  redis.on("error", () => {});
  const logger = createLogger("authz-cli", "silent");
  const { spicedb, authorization } = connectAuthorization(config, redis, logger);
  try {
    try {
      await redis.connect();
    } catch (err) {
      io.stderr.write(
        `error: cannot reach Redis at ${redactUrl(config.REDIS_URL)} (${(err as Error).message}). Start the stack with 'pnpm start' or set REDIS_URL.\n`,
      );
      return 1;
    }
    let result: unknown;
    if (parsed.command === "grants") {
      const grants = await authorization.listGrants(parsed.org, { type: parsed.type, id: parsed.id });
      result = {
        resourceType: parsed.type,
        resourceId: parsed.id,
        organization: parsed.org,
        data: grants.map((g) => ({
          userId: g.userId,
          role: g.role,
          ...(g.expiresAt ? { expiresAt: g.expiresAt.toISOString() } : {}),
        })),
      };
    } else {
      const db = createPostgres(config.DATABASE_URL, { connectionName: "authz-cli", maxConnections: 1 });
      try {
        const audit = new AuditLog(db, { retentionMs: config.AUDIT_RETENTION });
        const page = { limit: parsed.limit, cursor: parsed.cursor };
        result = parsed.resource
          ? await audit.forResource(parsed.org, parsed.resource, page)
          : await audit.forOrganization(parsed.org, page);
      } catch (err) {
        io.stderr.write(
          `error: cannot read the audit trail from PostgreSQL at ${redactUrl(config.DATABASE_URL)} (${(err as Error).message}). Start the stack with 'pnpm start' or set DATABASE_URL.\n`,
        );
        return 1;
      } finally {
        await db.close();
      }
    }
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    io.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  } finally {
    spicedb.close();
    redis.disconnect();
  }
}

type Parsed =
  | { command: "grants"; type: ResourceType; org: string; id: string }
  | {
      command: "audit";
      org: string;
      resource?: { type: ResourceType; id: string };
      limit: number;
      cursor?: string;
    };

function parse(argv: string[]): Parsed {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      org: { type: "string" },
      resource: { type: "string" },
      limit: { type: "string" },
      cursor: { type: "string" },
    },
  });
  const [command, ...rest] = positionals;
  if (command === "grants") {
    if (rest.length !== 2) throw new UsageError("grants takes TYPE and ORG/ID");
    return { command, type: resourceType(rest[0]), ...scopedResource(rest[1]) };
  }
  if (command === "audit") {
    if (rest.length) throw new UsageError(`unexpected '${rest.join(" ")}'`);
    if (!values.org || !orgIdSchema.safeParse(values.org).success)
      throw new UsageError("audit needs --org ORG");
    const limit = Number(values.limit ?? 20);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError("--limit is 1 to 1000");
    if (values.cursor !== undefined && !AUDIT_CURSOR.test(values.cursor))
      throw new UsageError("invalid --cursor");
    let resource: { type: ResourceType; id: string } | undefined;
    if (values.resource !== undefined) {
      const slash = values.resource.indexOf("/");
      if (slash < 1) throw new UsageError(`--resource expects TYPE/ID, got '${values.resource}'`);
      resource = {
        type: resourceType(values.resource.slice(0, slash)),
        id: values.resource.slice(slash + 1),
      };
    }
    return {
      command,
      org: values.org,
      limit,
      ...(resource ? { resource } : {}),
      ...(values.cursor ? { cursor: values.cursor } : {}),
    };
  }
  throw new UsageError(command ? `unknown command '${command}'` : "");
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
