import { describe, expect, it } from "vitest";
import { scanKeys, useTestRedis } from "../src/index.ts";

describe("scanKeys", () => {
  describe.each(["single", "cluster"] as const)("on %s Redis", (topology) => {
    const redis = useTestRedis(topology);

    it("finds every matching key, on every master of a cluster", async () => {
      // Hash tags spread the keys over the slots, so each of a cluster's three masters holds some.
      const keys = Array.from({ length: 30 }, (_, i) => `scan-test:{tag-${i}}:k`);
      await Promise.all(keys.map((key) => redis.redis.set(key, "1")));
      await redis.redis.set("other:{tag-0}", "1");

      expect(await scanKeys(redis.redis, "scan-test:*")).toEqual([...keys].sort());
      // What the helper is for: KEYS through a cluster client answers from one master only.
      const viaKeys = await redis.redis.keys("scan-test:*");
      if (topology === "cluster") expect(viaKeys.length).toBeLessThan(keys.length);
      else expect(viaKeys.length).toBe(keys.length);
    });
  });
});
