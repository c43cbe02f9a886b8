import { z } from "zod";
import { parseDuration } from "./duration.ts";
import { cutText } from "./errors.ts";

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
      const given = cleaned[name];
      if (given === undefined && issue.code === "invalid_type") return `${name}: required but not set`;
      return `${name}: ${describeProblem(name, given, issue)}`;
    }),
  );
}

/**
 * Settings whose values may be secret or carry credentials (a URL's password, an exporter's auth
 * header): never repeated in an error. Named by what they end with, so that settings about keys or
 * tokens (`BACKGROUND_RESPONSES_PER_KEY`, `LLM_CONTEXT_MAX_TOKENS`, `MCP_OAUTH_ACCESS_TOKEN_TTL`) still
 * name the value given.
 */
const SECRET_SETTING = /(SECRET|PASSWORD|TOKEN|CREDENTIALS?|DSN|URL|ENDPOINT|HEADERS|(?<!_PER)_KEYS?)$/i;
const MAX_ECHOED_CHARS = 60;

/**
 * What is wrong with a setting, naming the value given (`"abc" is not a number`) so an operator sees
 * which of several places set it, unless the setting may hold a secret. A message that already names
 * the value is kept as it is.
 */
function describeProblem(name: string, given: string | undefined, issue: z.core.$ZodIssue): string {
  // A refinement's own message (a file it names, a rule between settings) says what it means already.
  if (given === undefined || issue.code === "custom" || SECRET_SETTING.test(name)) return issue.message;
  const shown = JSON.stringify(cutText(given, MAX_ECHOED_CHARS));
  if (issue.code === "invalid_type" && issue.expected === "number") return `${shown} is not a number`;
  // zod's own words ("Too small: expected number to be >=600") said plainly; a schema's own message is kept.
  const zods = /^(Too (small|big)|Invalid (option|input|URL))\b/.test(issue.message);
  if (zods && issue.code === "too_small" && issue.origin === "number")
    return `${shown} is too small: the least allowed is ${issue.minimum}${issue.inclusive ? "" : " (not included)"}`;
  if (zods && issue.code === "too_big" && issue.origin === "number")
    return `${shown} is too big: the most allowed is ${issue.maximum}${issue.inclusive ? "" : " (not included)"}`;
  if (zods && issue.code === "invalid_value")
    return `${shown} is not one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  if (zods && issue.code === "invalid_format" && issue.format === "url") return `${shown} is not a URL`;
  return `${shown}: ${issue.message}`;
}

/** A whole number in [min, max], refused with the value given and `what` it should have been. */
const wholeNumber = (min: number, max: number, what: string) =>
  z.union([z.number(), z.string()]).transform((raw, ctx) => {
    const text = String(raw).trim();
    const n = /^[+-]?\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      ctx.addIssue({ code: "custom", message: `${JSON.stringify(String(raw))} is not ${what}` });
      return z.NEVER;
    }
    return n;
  });

/** For `main` modules: a bad configuration stops the process with every problem named. */
export function loadConfigOrExit<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
): z.output<S> {
  return exitOnConfigError(() => loadConfig(schema, env));
}

/**
 * For `main` modules: runs `check` (a rule over settings that one schema cannot see, such as what
 * `NODE_ENV=production` refuses, or a whole start-up that reads files the settings name); a `ConfigError`
 * it throws, or its promise rejects with, stops the process as a bad variable does (exit 78).
 */
export function exitOnConfigError<T>(check: () => T): T {
  try {
    const result = check();
    // A start-up that finds a bad setting as it goes (a key set that does not read) stops the same way.
    return (result instanceof Promise ? result.catch(exitIfConfigError) : result) as T;
  } catch (err) {
    return exitIfConfigError(err);
  }
}

function exitIfConfigError(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(78); // EX_CONFIG
  }
  throw err;
}

/** Building blocks shared by the per-process schemas. */
export const env = {
  port: (fallback: number) =>
    wholeNumber(0, 65535, "a port (a whole number from 0 to 65535)").default(fallback),
  positiveInt: (fallback: number) =>
    wholeNumber(1, Number.MAX_SAFE_INTEGER, "a whole number above 0").default(fallback),
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
  duration: (fallback: string) =>
    env
      .optionalDuration()
      .transform((ms) => ms ?? parseDuration(fallback)!)
      // The default as an operator writes it (`1h`), for the configuration reference.
      .meta({ default: fallback }),
  /** A duration with its unit, or unset. */
  optionalDuration: () =>
    z
      .string()
      .transform((text, ctx) => {
        const ms = parseDuration(text);
        if (ms === undefined || ms < 1) {
          ctx.addIssue({
            code: "custom",
            message:
              ms === undefined
                ? `${JSON.stringify(text)}: expected a duration with a unit: 30d, 12h, 15m, 5s or 250ms`
                : `${JSON.stringify(text)} is no time at all: a duration is at least 1ms`,
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
