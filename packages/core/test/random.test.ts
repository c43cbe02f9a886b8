import { randomHex } from "@gw/core/random";
import { describe, expect, it } from "vitest";

describe("randomHex", () => {
  it("gives the digits asked for, each of them random (no UUID version or variant digit among them)", () => {
    const drawn = Array.from({ length: 2_000 }, () => randomHex(30));
    expect(new Set(drawn).size).toBe(drawn.length);
    for (const digits of drawn) expect(digits).toMatch(/^[0-9a-f]{30}$/);
    for (let position = 0; position < 30; position++)
      expect(new Set(drawn.map((digits) => digits[position])).size, `digit ${position}`).toBe(16);
    expect(randomHex(24)).toMatch(/^[0-9a-f]{24}$/);
  });

  it("refuses more digits than a UUID holds at random", () => {
    expect(() => randomHex(31)).toThrow(RangeError);
    expect(() => randomHex(0)).toThrow(RangeError);
  });
});
