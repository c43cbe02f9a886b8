import { ConfigError, loadConfig } from "@gw/core/config";
import { describe, expect, it } from "vitest";
import { spicedbLocalConfigSchema } from "./config.ts";

describe("the local SpiceDB's settings", () => {
  it("refuse a schema file that cannot be read, naming the setting and the file (exit 78, not a failed start)", () => {
    let refused: unknown;
    try {
      loadConfig(spicedbLocalConfigSchema, { SPICEDB_SCHEMA_FILE: "/nonexistent/schema.zed" });
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).problems).toEqual([
      'SPICEDB_SCHEMA_FILE: "/nonexistent/schema.zed" cannot be read (ENOENT)',
    ]);
    // The repository's own schema, the default, reads.
    expect(loadConfig(spicedbLocalConfigSchema, {}).SPICEDB_SCHEMA_FILE).toMatch(/spicedb\/schema\.zed$/);
  });
});
