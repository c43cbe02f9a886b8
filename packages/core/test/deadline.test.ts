import { describe, expect, it } from "vitest";
import { withDeadline } from "../src/deadline.ts";

const late = () => new Error("too late");

describe("withDeadline", () => {
  it("answers what the promise gives in time", async () => {
    expect(await withDeadline(Promise.resolve("pong"), 1_000, late)).toBe("pong");
    await expect(withDeadline(Promise.reject(new Error("refused")), 1_000, late)).rejects.toThrow("refused");
  });

  it("fails with the late error once the time has passed", async () => {
    await expect(withDeadline(new Promise(() => {}), 20, late)).rejects.toThrow("too late");
  });
});
