import { describe, expect, it } from "vitest";
import { z } from "zod";
import { checkSpiceDBEnv, spicedbEnvShape } from "../src/authz/spicedb-config.ts";
import { ConfigError, env, loadConfig } from "../src/config.ts";
import { parseDuration } from "../src/duration.ts";

const schema = z.object({
  PORT: env.port(8080),
  FLAG: env.boolean(false),
  SECRET: z.string().min(8),
  REDIS_URL: env.redisUrl(),
});

describe("configuration", () => {
  it("applies defaults and coerces values", () => {
    expect(loadConfig(schema, { SECRET: "12345678", FLAG: "true", PORT: "9000" })).toEqual({
      PORT: 9000,
      FLAG: true,
      SECRET: "12345678",
      REDIS_URL: undefined,
    });
    expect(loadConfig(schema, { SECRET: "12345678", PORT: "" }).PORT).toBe(8080);
  });

  it("names every bad or missing variable at once", () => {
    let error: unknown;
    try {
      loadConfig(schema, { PORT: "eighty", FLAG: "maybe", REDIS_URL: "http://x" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(4);
    expect(problems.join("\n")).toMatch(/^PORT: "eighty" is not a port \(a whole number from 0 to 65535\)$/m);
    expect(problems.join("\n")).toMatch(/^FLAG: "maybe": expected true or false/m);
    expect(problems.join("\n")).toMatch(/^SECRET: required but not set/m);
    expect(problems.join("\n")).toMatch(/^REDIS_URL: must be a redis/m);
  });
});

/** The problems `loadConfig` names for `values`; fails the test when it accepts them. */
function problemsOf(schema: z.ZodType, values: Record<string, string>): string[] {
  try {
    loadConfig(schema, values);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("accepted");
}

describe("a refused value", () => {
  const numbers = z.object({
    PORT: env.port(8080),
    WORKERS: env.positiveInt(4),
    RATIO: z.coerce.number().min(0).max(1).optional(),
    MODE: z.enum(["fast", "safe"]).optional(),
    CLIENT_SECRET: z.string().min(32).optional(),
    DATABASE_URL: env.databaseUrl(),
  });

  it("is named in the problem, whatever kind of setting refused it", () => {
    expect(problemsOf(numbers, { PORT: "abc", WORKERS: "0", RATIO: "lots", MODE: "quick" })).toEqual([
      'PORT: "abc" is not a port (a whole number from 0 to 65535)',
      'WORKERS: "0" is not a whole number above 0',
      'RATIO: "lots" is not a number',
      'MODE: "quick" is not one of "fast", "safe"',
    ]);
    expect(problemsOf(numbers, { PORT: "65536" })).toEqual([
      'PORT: "65536" is not a port (a whole number from 0 to 65535)',
    ]);
    expect(problemsOf(numbers, { PORT: "80.5" })).toEqual([
      'PORT: "80.5" is not a port (a whole number from 0 to 65535)',
    ]);
    expect(problemsOf(numbers, { RATIO: "2" })).toEqual(['RATIO: "2" is too big: the most allowed is 1']);
    expect(problemsOf(numbers, { RATIO: "-1" })).toEqual([
      'RATIO: "-1" is too small: the least allowed is 0',
    ]);
    expect(loadConfig(numbers, { PORT: " 9000 ", WORKERS: "2" })).toMatchObject({ PORT: 9000, WORKERS: 2 });
  });

  it("is never repeated for a setting that may hold a secret or credentials, and a long one is cut", () => {
    const problems = problemsOf(numbers, {
      CLIENT_SECRET: "hunter2",
      DATABASE_URL: "mysql://root:hunter2@db/x",
    });
    expect(problems).toHaveLength(2);
    expect(problems.join("\n")).not.toContain("hunter2");
    expect(problemsOf(numbers, { MODE: "x".repeat(500) })[0]).toMatch(/^MODE: "x{60}…" is not one of /);
  });
});

describe("a refused value of the project's own settings", () => {
  // The names are the project's; the rules are any that refuse the value given.
  const positive = z.coerce.number().int().min(1).optional();
  const settings = z.object({
    BACKGROUND_RESPONSES_PER_KEY: positive,
    LLM_CONTEXT_MAX_TOKENS: positive,
    TOKEN_COUNT_WORKERS: positive,
    API_KEY_CACHE_TTL_MS: positive,
    MCP_OAUTH_ACCESS_TOKEN_TTL: env.optionalDuration(),
    VAULT_KEYS: z.string().min(100).optional(),
    LLM_API_KEY: z.string().min(100).optional(),
    METRICS_TOKEN: z.string().min(100).optional(),
    INTERNAL_ASSERTION_SECRET: z.string().min(100).optional(),
    OTEL_EXPORTER_OTLP_HEADERS: z
      .string()
      .regex(/^\w+=\w+$/)
      .optional(),
    OTEL_EXPORTER_OTLP_ENDPOINT: z
      .string()
      .regex(/^https:/)
      .optional(),
    LLM_BASE_URL: z
      .string()
      .regex(/^https:/)
      .optional(),
  });

  it("is named for settings about keys and tokens, which hold none", () => {
    const problems = problemsOf(settings, {
      BACKGROUND_RESPONSES_PER_KEY: "-1",
      LLM_CONTEXT_MAX_TOKENS: "0",
      TOKEN_COUNT_WORKERS: "-2",
      API_KEY_CACHE_TTL_MS: "-3",
      MCP_OAUTH_ACCESS_TOKEN_TTL: "soon",
    });
    expect(problems).toEqual([
      'BACKGROUND_RESPONSES_PER_KEY: "-1" is too small: the least allowed is 1',
      'LLM_CONTEXT_MAX_TOKENS: "0" is too small: the least allowed is 1',
      'TOKEN_COUNT_WORKERS: "-2" is too small: the least allowed is 1',
      'API_KEY_CACHE_TTL_MS: "-3" is too small: the least allowed is 1',
      expect.stringMatching(/^MCP_OAUTH_ACCESS_TOKEN_TTL: "soon": /),
    ]);
  });

  it("is never repeated for the settings that hold secrets, credentials or an exporter's headers", () => {
    const given = "hunter2-sk-live";
    const problems = problemsOf(settings, {
      VAULT_KEYS: given,
      LLM_API_KEY: given,
      METRICS_TOKEN: given,
      INTERNAL_ASSERTION_SECRET: given,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${given}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://user:${given}@collector:4318`,
      LLM_BASE_URL: `http://user:${given}@llm`,
    });
    expect(problems).toHaveLength(7);
    expect(problems.join("\n")).not.toContain(given);
  });
});

describe("durations", () => {
  const durations = z.object({ KEEP: env.duration("30d"), IDLE: env.optionalDuration() });

  it("take a unit, and default as written", () => {
    expect(parseDuration("30d")).toBe(30 * 86_400_000);
    expect(parseDuration("12h")).toBe(43_200_000);
    expect(parseDuration("15m")).toBe(900_000);
    expect(parseDuration("5s")).toBe(5_000);
    expect(parseDuration("250ms")).toBe(250);
    expect(parseDuration("1.5h")).toBe(5_400_000);
    expect(loadConfig(durations, {})).toEqual({ KEEP: 2_592_000_000, IDLE: undefined });
    expect(loadConfig(durations, { KEEP: "5s", IDLE: "7d" })).toEqual({ KEEP: 5_000, IDLE: 604_800_000 });
  });

  it("refuse a number without a unit, an unknown unit, zero and negatives, naming the variable", () => {
    for (const bad of ["30", "30 days", "3w", "-5s", "s", "1e3s"]) expect(parseDuration(bad)).toBeUndefined();
    expect(parseDuration("0s")).toBe(0);
    expect(() => loadConfig(durations, { KEEP: "30", IDLE: "0s" })).toThrow(
      /KEEP: "30": expected a duration with a unit[\s\S]*IDLE: "0s" is no time at all: a duration is at least 1ms/,
    );
  });

  it("say their default as written, for the configuration reference", () => {
    expect(z.globalRegistry.get(durations.shape.KEEP)).toMatchObject({ default: "30d" });
  });
});

describe("SPICEDB_ZEDTOKEN_TTL", () => {
  const spicedb = z.object(spicedbEnvShape).superRefine((c, ctx) => checkSpiceDBEnv(c, ctx));
  const problems = (values: Record<string, string>) => {
    try {
      loadConfig(spicedb, values);
      return [];
    } catch (err) {
      return (err as ConfigError).problems;
    }
  };

  it("outlives the recent window and a kept decision by a minute, and is at most a day", () => {
    expect(loadConfig(spicedb, {}).SPICEDB_ZEDTOKEN_TTL).toBe(3_600_000);
    expect(problems({ SPICEDB_ZEDTOKEN_TTL: "71s" })).toEqual([]);
    expect(problems({ SPICEDB_ZEDTOKEN_TTL: "70s" })).toEqual([
      "SPICEDB_ZEDTOKEN_TTL: 70s is not between 71s (SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS + DECISION_CACHE_MAX_AGE_MS + a minute) and a day",
    ]);
    expect(
      problems({ SPICEDB_ZEDTOKEN_TTL: "2m", SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: "60000" }),
    ).toHaveLength(1);
    expect(problems({ SPICEDB_ZEDTOKEN_TTL: "25h" })).toHaveLength(1);
  });
});
