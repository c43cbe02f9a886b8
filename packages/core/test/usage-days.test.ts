import { describe, expect, it } from "vitest";
import {
  CALL_BREAKDOWNS,
  usageDays,
  usageField,
  usagePair,
  utcDay,
  utcDayAt,
  withEveryBreakdown,
} from "../src/usage-days.ts";

describe("utcDayAt", () => {
  it("is utcDay of the time, across midnights in either direction, the first and last millisecond of a day", () => {
    const times = [
      Date.UTC(2026, 10, 30, 23, 59, 59, 999),
      Date.UTC(2026, 11, 1, 0, 0, 0, 0),
      Date.UTC(2026, 11, 1, 12, 0, 0, 0),
      Date.UTC(2026, 10, 30, 0, 0, 0, 0),
      Date.UTC(2026, 10, 29, 23, 59, 59, 999),
      Date.UTC(2024, 1, 29, 6, 0, 0, 0),
      Date.UTC(1969, 11, 31, 23, 0, 0, 0),
      0,
      Date.UTC(2026, 11, 1, 0, 0, 0, 1),
      Date.UTC(2026, 11, 1, 23, 59, 59, 999),
      Date.UTC(2026, 11, 2, 0, 0, 0, 0),
    ];
    for (const ms of times) expect([ms, utcDayAt(ms)]).toEqual([ms, utcDay(new Date(ms))]);
    expect(utcDayAt(Date.UTC(2026, 11, 2, 0, 0, 0, 0) - 1)).toBe("2026-12-01");
  });

  it("usageDays lists each UTC day of a range once, in order", () => {
    expect(usageDays("2026-11-29", "2026-12-02")).toEqual([
      "2026-11-29",
      "2026-11-30",
      "2026-12-01",
      "2026-12-02",
    ]);
  });
});

describe("withEveryBreakdown", () => {
  // Names a URI-encoding changes, and one whose encoding holds "%00" as text ("%2500").
  const user = "Zoë/1%00";
  const key = "key_1";
  const model = "gpt 4";
  const f = (dimension: string, parts: string[], metric: string) =>
    usageField(dimension, usagePair(...parts), metric);

  it("adds each breakdown a call writes to those it adds up to, beside the same breakdowns written whole before", () => {
    const day = {
      // Two calls written the way calls are now: one served by a deployment and paid with the organization's key.
      [f(CALL_BREAKDOWNS.userKey, [user, key], "requests")]: "2",
      [f(CALL_BREAKDOWNS.userKey, [user, key], "input_tokens")]: "30",
      [f(CALL_BREAKDOWNS.userModelDeployment, [user, model, "openai", "gpt-4o"], "requests")]: "1",
      [f(CALL_BREAKDOWNS.userModel, [user, model], "requests")]: "1",
      [f(CALL_BREAKDOWNS.userPaidBy, [user, "organization"], "requests")]: "1",
      [f("key_model_deployment", [key, model, "openai", "gpt-4o"], "requests")]: "1",
      // One call of the same end user, key and model written the way calls were before.
      [usageField("total", "", "requests")]: "1",
      [usageField("user", user, "requests")]: "1",
      [usageField("key", key, "requests")]: "1",
      [usageField("model", model, "requests")]: "1",
      [f("user_key", [user, key], "requests")]: "1",
      [f("user_model", [user, model], "requests")]: "1",
    };
    expect(withEveryBreakdown(day)).toEqual(
      new Map([
        [usageField("total", "", "requests"), 3],
        [usageField("total", "", "input_tokens"), 30],
        [usageField("user", user, "requests"), 3],
        [usageField("user", user, "input_tokens"), 30],
        [usageField("key", key, "requests"), 3],
        [usageField("key", key, "input_tokens"), 30],
        [f("user_key", [user, key], "requests"), 3],
        [f("user_key", [user, key], "input_tokens"), 30],
        [usageField("model", model, "requests"), 3],
        [f("user_model", [user, model], "requests"), 3],
        [f("model_deployment", [model, "openai", "gpt-4o"], "requests"), 1],
        [f("user_model_deployment", [user, model, "openai", "gpt-4o"], "requests"), 1],
        [usageField("paid_by", "organization", "requests"), 1],
        [f("user_paid_by", [user, "organization"], "requests"), 1],
        [f("key_model_deployment", [key, model, "openai", "gpt-4o"], "requests"), 1],
      ]),
    );
  });
});
