import { describe, expect, it } from "vitest";
import { z } from "zod";
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
    expect(problems.join("\n")).toMatch(/^PORT: /m);
    expect(problems.join("\n")).toMatch(/^FLAG: expected true or false/m);
    expect(problems.join("\n")).toMatch(/^SECRET: required but not set/m);
    expect(problems.join("\n")).toMatch(/^REDIS_URL: must be a redis/m);
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
      /KEEP: expected a duration with a unit[\s\S]*IDLE: expected a duration with a unit/,
    );
  });
});
