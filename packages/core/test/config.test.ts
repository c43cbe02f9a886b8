import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError, env, loadConfig } from "../src/config.ts";

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
