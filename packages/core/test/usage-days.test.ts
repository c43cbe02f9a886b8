import { describe, expect, it } from "vitest";
import { usageDays, utcDay, utcDayAt } from "../src/usage-days.ts";

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
