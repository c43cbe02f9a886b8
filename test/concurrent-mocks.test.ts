import { describe, expect, it, vi } from "vitest";

/**
 * vitest clears every mock's recorded calls as each test starts (`clearMocks`, on by default), whichever
 * test made the mock: where blocks of tests run beside each other (`describeEachTopology` runs its
 * topologies so), a test starting in one block wiped what a test of the other had counted so far. A
 * quota-limiters test failed so, once (`settle` called 1 time, then 0 times). vitest.config.ts turns it
 * off; each test makes and restores its own spies. Barriers force the order here: block B's second test
 * starts after block A's test has counted a call, and before that test checks its count.
 */
const counted = Promise.withResolvers<void>();
const laterTestStarted = Promise.withResolvers<void>();
const order: string[] = [];

// Blocks marked concurrent run beside each other; inside each, "in turn" puts its tests back in order.
describe("a spy's calls, while another block's test starts", () => {
  describe("block A", { concurrent: true }, () => {
    describe("in turn", { concurrent: false }, () => {
      it("are kept", async () => {
        const target = { run: (n: number) => n };
        const spy = vi.spyOn(target, "run");
        target.run(1);
        order.push("A counted");
        counted.resolve();
        await laterTestStarted.promise;
        expect(order).toEqual(["A counted", "B waited", "B's next test started"]);
        expect(spy.mock.calls).toEqual([[1]]);
        spy.mockRestore();
      });
    });
  });

  describe("block B", { concurrent: true }, () => {
    describe("in turn", { concurrent: false }, () => {
      it("waits until block A's test has counted its call", async () => {
        await counted.promise;
        order.push("B waited");
        expect(order).toEqual(["A counted", "B waited"]);
      });

      it("starts then, and its own spy counts its own calls", () => {
        order.push("B's next test started");
        laterTestStarted.resolve();
        const target = { run: (n: number) => n };
        const spy = vi.spyOn(target, "run");
        target.run(2);
        expect(spy.mock.calls).toEqual([[2]]);
        spy.mockRestore();
      });
    });
  });
});
