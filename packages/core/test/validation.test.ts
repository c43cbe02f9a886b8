import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ValidationFailed } from "../src/errors.ts";
import { MAX_ECHOED_INPUT_CHARS, validate } from "../src/validation.ts";

const schema = z.strictObject({
  branch: z.string().min(1).max(255),
  generation: z.int().min(1),
  ceiling: z.int().max(10).optional(),
  force: z.boolean().optional(),
  role: z.enum(["owner", "writer", "reader"]).optional(),
  audience: z.url({ protocol: /^https?$/ }).optional(),
});

function issuesFor(value: unknown) {
  try {
    validate("body", schema, value);
  } catch (err) {
    if (err instanceof ValidationFailed) return err.issues;
    throw err;
  }
  throw new Error("expected a validation failure");
}

describe("zod issues become pydantic-style validation errors", () => {
  it.each([
    [{ generation: 1 }, { loc: ["body", "branch"], type: "missing", msg: "Field required" }],
    [
      { branch: 3, generation: 1 },
      { loc: ["body", "branch"], type: "string_type", input: 3 },
    ],
    [
      { branch: "", generation: 1 },
      { loc: ["body", "branch"], type: "string_too_short", ctx: { min_length: 1 } },
    ],
    [
      { branch: "b".repeat(256), generation: 1 },
      { loc: ["body", "branch"], type: "string_too_long", ctx: { max_length: 255 } },
    ],
    [
      { branch: "b", generation: "1" },
      { loc: ["body", "generation"], type: "int_type", input: "1" },
    ],
    [
      { branch: "b", generation: 1.5 },
      { loc: ["body", "generation"], type: "int_type", input: 1.5 },
    ],
    [
      { branch: "b", generation: 0 },
      { loc: ["body", "generation"], type: "greater_than_equal", ctx: { ge: 1 } },
    ],
    [
      { branch: "b", generation: 1, ceiling: 11 },
      { loc: ["body", "ceiling"], type: "less_than_equal", ctx: { le: 10 } },
    ],
    [
      { branch: "b", generation: 1, force: "yes" },
      { loc: ["body", "force"], type: "bool_type", input: "yes" },
    ],
    [
      { branch: "b", generation: 1, role: "admin" },
      {
        loc: ["body", "role"],
        type: "enum",
        msg: "Input should be 'owner', 'writer' or 'reader'",
        input: "admin",
      },
    ],
    [
      { branch: "b", generation: 1, audience: "not a url" },
      { loc: ["body", "audience"], type: "url_parsing" },
    ],
    [
      { branch: "b", generation: 1, audience: "ftp://x.example" },
      { loc: ["body", "audience"], type: "url_parsing" },
    ],
    [
      { branch: "b", generation: 1, extra: true },
      { loc: ["body", "extra"], type: "extra_forbidden", input: true },
    ],
  ])("%j → %j", (value, expected) => {
    const issues = issuesFor(value);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject(expected);
    expect(typeof issues[0]!.msg).toBe("string");
  });

  it("reports every problem, not just the first", () => {
    const types = issuesFor({ branch: "", generation: 0, other: 1 }).map((i) => i.type);
    expect(types.sort()).toEqual(["extra_forbidden", "greater_than_equal", "string_too_short"]);
  });

  it("treats a non-object body as a dictionary type error and an absent body as missing", () => {
    expect(issuesFor([1])).toEqual([
      { loc: ["body"], type: "dict_type", msg: expect.any(String), input: [1] },
    ]);
    expect(issuesFor(undefined)).toEqual([{ loc: ["body"], type: "missing", msg: "Field required" }]);
  });

  it("echoes a failing input only while it is small, however big or deep it is", () => {
    const fits = "b".repeat(MAX_ECHOED_INPUT_CHARS - 2);
    expect(issuesFor({ branch: 7, generation: 1, extra: fits })).toEqual([
      expect.objectContaining({ loc: ["body", "branch"], input: 7 }),
      expect.objectContaining({ loc: ["body", "extra"], input: fits }),
    ]);
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]));
    const issues = issuesFor({ branch: deep, generation: wide, ceiling: 99, extra: `${fits}bb` });
    expect(issues.map((i) => i.type)).toEqual([
      "string_type",
      "int_type",
      "less_than_equal",
      "extra_forbidden",
    ]);
    expect(issues.filter((i) => "input" in i)).toEqual([expect.objectContaining({ input: 99 })]);
    // What the 422 sends can be serialised (a deep echo used to overflow the stack there).
    expect(JSON.stringify(issues).length).toBeLessThan(2_000);
  });

  it("returns the parsed value when it is valid", () => {
    expect(validate("body", schema, { branch: "main", generation: 2 })).toEqual({
      branch: "main",
      generation: 2,
    });
  });
});
