import { z } from "zod";
import { parseDuration } from "./duration.ts";

/**
 * Parses the environment with one zod schema. Every problem is collected so an
 * operator fixes them all in one go; the process entry point prints them and
 * exits (see `loadConfigOrExit`).
 */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export function loadConfig<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
): z.output<S> {
  // Empty variables count as unset, as they do in most deployment tools.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(cleaned);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => {
      const name = issue.path.join(".") || "(environment)";
      const missing = issue.code === "invalid_type" && cleaned[name] === undefined;
      return missing ? `${name}: required but not set` : `${name}: ${issue.message}`;
    }),
  );
}

/** For `main` modules: a bad configuration stops the process with every problem named. */
export function loadConfigOrExit<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
): z.output<S> {
  return exitOnConfigError(() => loadConfig(schema, env));
}

/**
 * For `main` modules: runs `check` (a rule over settings that one schema cannot see, such as what
 * `NODE_ENV=production` refuses); a `ConfigError` it throws stops the process as a bad variable does.
 */
export function exitOnConfigError<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
}

/** Building blocks shared by the per-process schemas. */
export const env = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  positiveInt: (fallback: number) => z.coerce.number().int().positive().default(fallback),
  boolean: (fallback: boolean) => env.optionalBoolean().transform((v) => v ?? fallback),
  /** A true/false variable whose absence the schema resolves itself. */
  optionalBoolean: () =>
    z
      .enum(["true", "false", "1", "0"], { message: "expected true or false" })
      .transform((v) => v === "true" || v === "1")
      .optional(),
  logLevel: () => z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  redisUrl: () =>
    z
      .string()
      .regex(
        /^rediss?(\+cluster)?:\/\//,
        "must be a redis:// or rediss:// URL, or redis+cluster://host:port,host:port for a Redis Cluster",
      )
      .optional(),
  /** A duration with its unit (`30d`, `12h`, `5s`, `250ms`), in milliseconds; at least one millisecond. */
  duration: (fallback: string) => env.optionalDuration().transform((ms) => ms ?? parseDuration(fallback)!),
  /** A duration with its unit, or unset. */
  optionalDuration: () =>
    z
      .string()
      .transform((text, ctx) => {
        const ms = parseDuration(text);
        if (ms === undefined || ms < 1) {
          ctx.addIssue({
            code: "custom",
            message: "expected a duration with a unit: 30d, 12h, 15m, 5s or 250ms",
          });
          return z.NEVER;
        }
        return ms;
      })
      .optional(),
  databaseUrl: () =>
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
      .optional(),
};
