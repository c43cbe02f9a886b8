import { readFile } from "node:fs/promises";
import { relative } from "node:path";
import { LRUCache } from "lru-cache";
import { describe, expect, it } from "vitest";
import { entryBound } from "../src/bounded-cache.ts";
import { ROOT, sources } from "./project-sources.ts";

describe("entryBound", () => {
  it("keeps at most its bound, evicting the least recently used", () => {
    const cache = new LRUCache<string, number>(entryBound(3));
    cache.set("a", 1).set("b", 2).set("c", 3);
    cache.get("a");
    cache.set("d", 4);
    expect([...cache.keys()].sort()).toEqual(["a", "c", "d"]);
    expect(cache.size).toBe(3);
  });

  it("allocates nothing for its bound: a cache of 10,000,000 entries starts empty", () => {
    const used = () => {
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const before = used();
    const caches = Array.from({ length: 5 }, () => new LRUCache<string, number>(entryBound(10_000_000)));
    // lru-cache's own `max: 10_000_000` allocates over 200 MB for each.
    expect(used() - before).toBeLessThan(20 * 1024 * 1024);
    expect(caches.every((cache) => cache.size === 0)).toBe(true);
  });

  it("is how every bounded cache of the project is bounded: no LRUCache allocates its `max` up front", async () => {
    const offenders: string[] = [];
    for (const file of await sources()) {
      const text = await readFile(file, "utf8");
      for (const match of text.matchAll(/new LRUCache\b[^(]*\(\s*\{([^}]*)\}/g)) {
        if (/(^|[\s,{])max\s*:/.test(match[1]!)) offenders.push(relative(ROOT, file));
      }
    }
    expect(offenders).toEqual([]);
  });
});
