import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { afterEach, describe, expect, it } from "vitest";
import { gatewayConfigSchema } from "../../src/config.ts";
import { startGateway } from "../../src/server.ts";

describe("the vault's keys at start", () => {
  const before = process.env.NODE_ENV;
  afterEach(() => {
    process.env.NODE_ENV = before;
  });

  it("in production (NODE_ENV=production) the gateway refuses to start without VAULT_KEYS, naming it", async () => {
    process.env.NODE_ENV = "production";
    const dir = await mkdtemp(join(tmpdir(), "gw-vault-"));
    const config = gatewayConfigSchema.parse({ PORT: "0", DATA_DIR: dir, REDIS_URL: "redis://127.0.0.1:9" });
    const refused = await startGateway(config, createLogger("test", "silent")).catch((e) => e);
    expect(refused).toBeInstanceOf(ConfigError);
    expect(refused.message).toMatch(/VAULT_KEYS: required in production/);
    // No development key was made either.
    await expect(readFile(join(dir, "vault-key"), "utf8")).rejects.toThrow();
  });

  it("VAULT_KEYS that is not id:base64 of 32 bytes stops the configuration", () => {
    expect(() => gatewayConfigSchema.parse({ VAULT_KEYS: "k1:c2hvcnQ=" })).toThrow(/32 bytes/);
  });
});
