import { randomBytes } from "node:crypto";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import type { BudgetDeps } from "../src/budgets/admit-model-call.ts";
import { createBudgetMetrics } from "../src/budgets/budget-metrics.ts";
import { priceBook } from "./providers.ts";

/** Budget admission on `redis` for tests that wire the model-call pipeline by hand (metrics in a registry of their own). */
export function testBudgetDeps(redis: RedisClient, overrides: Partial<BudgetDeps> = {}): BudgetDeps {
  return {
    windows: new CountingWindows(redis),
    prices: priceBook(),
    defaultMaxOutputTokens: 100,
    metrics: createBudgetMetrics(createMetrics(`test_${randomBytes(4).toString("hex")}`)),
    logger: createLogger("budget-test", "silent"),
    ...overrides,
  };
}
