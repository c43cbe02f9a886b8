import { describe, expect, it } from "vitest";
import { issuedAt, newCompletionId, newId } from "./ids.ts";

describe("the service's ids", () => {
  const at = Date.UTC(2026, 10, 29, 7, 0, 0);

  it("are the prefix, the time of issue and 80 random bits, as 32 hex digits", () => {
    const id = newId("resp", at);
    expect(id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(newCompletionId(at)).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(issuedAt(id, at)).toBe(at);
  });

  it("have no fixed digit among the random ones (no UUID version or variant digit)", () => {
    const random = Array.from({ length: 2_000 }, () => newId("msg", at).slice(-20));
    expect(new Set(random).size).toBe(random.length);
    for (let position = 0; position < 20; position++) {
      const seen = new Set(random.map((digits) => digits[position]));
      expect(seen.size, `digit ${position}`).toBe(16);
    }
  });
});
