import { NANO_USD_PER_USD } from "@gw/core/windows";

/** A model's prices in US dollars per million tokens. */
export interface ModelPrice {
  input: number;
  cachedInput: number;
  output: number;
}

/** `LLM_MODELS` parsed: the model names (as before), with the prices of those that have one. */
export type ModelList = string[] & { prices: ReadonlyMap<string, ModelPrice> };

const PRICE = /^\d+(\.\d{1,3})?$/;

/**
 * `gpt-4o-mini=0.15/0.075/0.6,echo-small` → names `[gpt-4o-mini, echo-small]`
 * and a price for gpt-4o-mini: input, cached input and output, in dollars per
 * million tokens, at most three decimals (a thousandth of a dollar per
 * million tokens: one billionth of a dollar per token, the unit spend is
 * counted in). Throws a message naming the bad entry.
 */
export function parseModelList(value: string): ModelList {
  const names: string[] = [];
  const prices = new Map<string, ModelPrice>();
  for (const entry of value
    .split(",")
    .map((m) => m.trim())
    .filter(Boolean)) {
    const [name, price, ...rest] = entry.split("=").map((p) => p.trim());
    if (!name || rest.length > 0) throw new Error(`'${entry}' is not MODEL or MODEL=INPUT/CACHED/OUTPUT`);
    names.push(name);
    if (price === undefined) continue;
    const parts = price.split("/");
    if (parts.length !== 3 || !parts.every((p) => PRICE.test(p)))
      throw new Error(
        `'${entry}': prices are INPUT/CACHED/OUTPUT in dollars per million tokens, e.g. ${name}=0.15/0.075/0.6`,
      );
    const [input, cachedInput, output] = parts.map(Number) as [number, number, number];
    prices.set(name, { input, cachedInput, output });
  }
  return Object.assign(names, { prices });
}

/** At most three decimals: a thousandth of a dollar per million tokens, one nano-USD per token (`LLM_MODELS`'s rule). */
export const hasPriceDecimals = (dollarsPerMillion: number) =>
  Math.abs(dollarsPerMillion * 1000 - Math.round(dollarsPerMillion * 1000)) < 1e-6;

/** Nano-USD per token of a price in dollars per million tokens (exact: at most three decimals). */
const perToken = (dollarsPerMillion: number) =>
  Math.round((dollarsPerMillion * NANO_USD_PER_USD) / 1_000_000);

/** What tokens cost at `price`, in nano-USD: cached input tokens at the cached price, the rest of the input at the input price. */
export function costNanoUsd(
  price: ModelPrice,
  usage: { input_tokens: number; output_tokens: number; cached_tokens?: number },
): number {
  const cached = Math.min(usage.cached_tokens ?? 0, usage.input_tokens);
  return (
    (usage.input_tokens - cached) * perToken(price.input) +
    cached * perToken(price.cachedInput) +
    usage.output_tokens * perToken(price.output)
  );
}
