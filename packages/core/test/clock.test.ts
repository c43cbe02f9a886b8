import { describe, expect, it } from "vitest";
import { ManualClock, retentionCutoff, systemClock } from "../src/clock.ts";

describe("ManualClock", () => {
  it("stands still until advanced, then runs what falls due in time order, at its time", () => {
    const clock = new ManualClock(0);
    const ran: [string, number][] = [];
    clock.schedule(30, () => ran.push(["b", clock.now()]));
    clock.schedule(10, () => ran.push(["a", clock.now()]));
    const cancel = clock.schedule(20, () => ran.push(["cancelled", clock.now()]));
    clock.schedule(31, () => ran.push(["later", clock.now()]));
    cancel();
    expect(clock.now()).toBe(0);
    clock.advance(30);
    expect(ran).toEqual([
      ["a", 10],
      ["b", 30],
    ]);
    expect(clock.now()).toBe(30);
    expect(clock.pending).toBe(1);
  });

  it("runs a timer scheduled by a timer within the same advance, if it falls due", () => {
    const clock = new ManualClock(0);
    const ticks: number[] = [];
    const tick = () => {
      ticks.push(clock.now());
      clock.schedule(100, tick);
    };
    clock.schedule(100, tick);
    clock.advance(350);
    expect(ticks).toEqual([100, 200, 300]);
    expect(clock.pending).toBe(1);
  });
});

describe("systemClock", () => {
  it("runs a scheduled function in real time, and not once cancelled", async () => {
    const start = systemClock.now();
    const ran = await new Promise<number>((resolve) =>
      systemClock.schedule(20, () => resolve(systemClock.now())),
    );
    expect(ran - start).toBeGreaterThanOrEqual(19);
    let cancelledRan = false;
    systemClock.schedule(1, () => {
      cancelledRan = true;
    })();
    await new Promise((r) => setTimeout(r, 20));
    expect(cancelledRan).toBe(false);
  });
});

describe("wall time", () => {
  it("of a manual clock starts where it is told and moves with advance; the system's is the epoch", () => {
    const clock = new ManualClock(0, 1_700_000_000_000);
    expect(clock.wall()).toBe(1_700_000_000_000);
    clock.advance(1_500);
    expect(clock.wall()).toBe(1_700_000_001_500);
    expect(Math.abs(systemClock.wall() - Date.now())).toBeLessThan(1_000);
  });
});

describe("retentionCutoff", () => {
  it("is the clock's wall time less the retention, and follows the clock; no retention, no cutoff", () => {
    const clock = new ManualClock(0, 1_700_000_000_000);
    expect(retentionCutoff(clock, 60_000)).toEqual(new Date(1_699_999_940_000));
    clock.advance(1_000);
    expect(retentionCutoff(clock, 60_000)).toEqual(new Date(1_699_999_941_000));
    expect(retentionCutoff(clock, undefined)).toBeNull();
  });
});
