import { resolve } from "node:path";
import { ConfigError, loadConfig } from "@gw/core/config";
import { RUN_TO_EXIT_TEST_TIMEOUT_MS, runToExit } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { refuseDevelopmentSettings, serviceConfigSchema } from "../src/config.ts";

const PACKAGE = resolve(import.meta.dirname, "..");

describe("LLM_DEVELOPMENT_PROVIDER (the development model provider of `pnpm start`)", () => {
  const development = loadConfig(serviceConfigSchema, {
    LLM_BASE_URL: "http://127.0.0.1:9/v1",
    LLM_DEVELOPMENT_PROVIDER: "true",
  });

  it("is allowed outside production, and refused with NODE_ENV=production, naming it", () => {
    expect(() => refuseDevelopmentSettings(development, undefined)).not.toThrow();
    expect(() => refuseDevelopmentSettings(development, "development")).not.toThrow();
    const refused = (() => {
      try {
        refuseDevelopmentSettings(development, "production");
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).problems).toEqual([
      expect.stringMatching(/^LLM_DEVELOPMENT_PROVIDER: not allowed with NODE_ENV=production/),
    ]);
    const real = loadConfig(serviceConfigSchema, { LLM_BASE_URL: "http://127.0.0.1:9/v1" });
    expect(() => refuseDevelopmentSettings(real, "production")).not.toThrow();
  });

  it.concurrent.each(["src/main.ts", "src/eval-worker-main.ts"])(
    "%s with NODE_ENV=production exits 78 naming it, before connecting to anything",
    async (entry) => {
      const failed = await runToExit(resolve(PACKAGE, entry), {
        PATH: process.env.PATH,
        NODE_ENV: "production",
        LLM_BASE_URL: "http://127.0.0.1:9/v1",
        LLM_DEVELOPMENT_PROVIDER: "true",
        // Nothing listens here: a process that went on would fail otherwise, not with 78.
        REDIS_URL: "redis://127.0.0.1:9",
        DATABASE_URL: "postgres://gateway@127.0.0.1:9/gateway",
        SPICEDB_ENDPOINT: "127.0.0.1:9",
        SPICEDB_PRESHARED_KEY: "development-key",
      });
      expect(failed.code).toBe(78);
      expect(failed.stderr).toMatch(
        /^Invalid configuration:\n {2}- LLM_DEVELOPMENT_PROVIDER: not allowed with NODE_ENV=production/,
      );
      expect(failed.stdout).toBe("");
    },
    RUN_TO_EXIT_TEST_TIMEOUT_MS,
  );
});
