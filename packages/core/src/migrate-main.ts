/**
 * `node packages/core/src/migrate-main.ts`: applies the migrations of
 * `packages/core/migrations` to `DATABASE_URL` (else the local PostgreSQL of
 * `pnpm start`) and exits: the deployment's migration step (compose's
 * `migrate` service, the Kubernetes init container), run before the
 * processes start. They apply them too; whichever comes first does the work.
 */
import { z } from "zod";
import { env, loadConfigOrExit } from "./config.ts";
import { createLogger, redactUrl } from "./logger.ts";
import { localDatabaseUrl, migrate } from "./postgres.ts";

const config = loadConfigOrExit(
  z
    .object({ DATABASE_URL: env.databaseUrl(), LOG_LEVEL: env.logLevel() })
    .transform((c) => ({ ...c, DATABASE_URL: c.DATABASE_URL ?? localDatabaseUrl() })),
);
const logger = createLogger("migrate", config.LOG_LEVEL);
try {
  const applied = await migrate(config.DATABASE_URL);
  logger.info({ database: redactUrl(config.DATABASE_URL), applied }, "database schema up to date");
} catch (err) {
  const cause = ((err as Error).cause as Error | undefined)?.message;
  logger.error(
    { database: redactUrl(config.DATABASE_URL), err: (err as Error).message, cause },
    "migrations failed",
  );
  process.exitCode = 1;
}
