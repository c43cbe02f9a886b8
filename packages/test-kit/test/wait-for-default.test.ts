import { describe, expect, it, vi } from "vitest";

// Not importing the setup file's module: what is checked is that vitest runs it before every file.
describe("vi.waitFor in this suite (packages/test-kit/src/wait-for-default.ts)", () => {
  it("waits up to 10 s unless told: a condition true after 1.5 s is met (vitest's own default gives up at 1 s)", async () => {
    const ready = performance.now() + 1_500;
    await vi.waitFor(() => expect(performance.now()).toBeGreaterThanOrEqual(ready));
  });

  it("keeps a timeout the test gives", async () => {
    const never = vi.waitFor(() => expect(false).toBe(true), { timeout: 100, interval: 10 });
    await expect(never).rejects.toThrow();
  });
});
