/**
 * lru-cache options that bound a cache to `entries` entries without
 * allocating the bound up front. lru-cache's own `max` allocates arrays of
 * `max` slots in the constructor: for 100,000 (the decision cache's default)
 * 30–60 ms of CPU and 2.8 MB at every start of a gateway or service, before
 * any entry exists, and 10,000,000 (DECISION_CACHE_SIZE's upper limit) would
 * take seconds and over 200 MB. Bounded by `maxSize` with every entry counting
 * one, a cache grows as it fills and evicts its least recently used entry
 * alike. Every bounded cache of the project takes its bound here.
 */
export function entryBound(entries: number): { maxSize: number; sizeCalculation: () => number } {
  return { maxSize: entries, sizeCalculation: () => 1 };
}
