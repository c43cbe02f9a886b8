import { type Clock, systemClock } from "@gw/core/clock";
import type { Ids } from "../src/ids.ts";
import { ADAPTERS } from "../src/llm/adapters.ts";
import { shorthandCatalogue } from "../src/llm/catalogue.ts";
import { NO_COOLDOWNS } from "../src/llm/cooldowns.ts";
import type { ModelPrice } from "../src/llm/prices.ts";
import { ModelRouter } from "../src/llm/router.ts";

/**
 * The router over the one-deployment shorthand (`LLM_BASE_URL` and the
 * rest), for tests that wire the model-call pipeline by hand: no shared
 * cooldowns, no retries to make.
 */
export function testProvider(options: {
  baseUrl: string;
  apiKey?: string | undefined;
  defaultModel?: string | undefined;
  timeoutMs?: number;
  ids: Ids;
  clock?: Clock;
}): ModelRouter {
  return new ModelRouter({
    catalogue: shorthandCatalogue({
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      defaultModel: options.defaultModel,
      models: undefined,
      timeoutMs: options.timeoutMs ?? 5_000,
    }),
    adapters: ADAPTERS,
    adapterOptions: { maxResponseBytes: 1 << 20, maxEventChars: 1 << 16, ids: options.ids },
    cooldowns: NO_COOLDOWNS,
    clock: options.clock ?? systemClock,
    random: () => 0,
    settings: { deadlineMs: 60_000, backoffMs: 0, retryAfterMaxMs: 60_000 },
  });
}

/** Prices by model name, as budgets reserve them: the highest of the names a call may reach; none if one is unpriced. */
export function priceBook(prices: ReadonlyMap<string, ModelPrice> = new Map()) {
  return {
    reservePrice(names: readonly string[]): ModelPrice | undefined {
      let highest: ModelPrice | undefined;
      for (const name of names) {
        const price = prices.get(name);
        if (!price) return undefined;
        highest = highest
          ? {
              input: Math.max(highest.input, price.input),
              cachedInput: Math.max(highest.cachedInput, price.cachedInput),
              output: Math.max(highest.output, price.output),
            }
          : price;
      }
      return highest;
    },
  };
}
