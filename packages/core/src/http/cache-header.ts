/**
 * The header of the response cache (docs/api/cache.md): a request's `off` or `refresh`, and on every
 * answer of a model route what the cache did (`hit`, `miss`, `bypass`). The service answers with it;
 * the gateway says `bypass` on the refusals it makes itself.
 */
export const CACHE_HEADER = "x-gateway-cache";
