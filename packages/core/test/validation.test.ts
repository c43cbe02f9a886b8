import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ValidationFailed } from "../src/errors.ts";
import { choosing, MAX_ECHOED_INPUT_CHARS, queryInt, secretField, validate } from "../src/validation.ts";

const schema = z.strictObject({
  branch: z.string().min(1).max(255),
  generation: z.int().min(1),
  ceiling: z.int().max(10).optional(),
  force: z.boolean().optional(),
  role: z.enum(["owner", "writer", "reader"]).optional(),
  audience: z.url({ protocol: /^https?$/ }).optional(),
});

function issuesFor(value: unknown, against: z.ZodType = schema) {
  try {
    validate("body", against, value);
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
    // Past the safe integers: the field's own bound only, not zod's safe-integer bound beside it.
    [
      { branch: "b", generation: 1, ceiling: 2 ** 60 },
      { loc: ["body", "ceiling"], type: "less_than_equal", ctx: { le: 10 } },
    ],
    [
      { branch: "b", generation: -(2 ** 60) },
      { loc: ["body", "generation"], type: "greater_than_equal", ctx: { ge: 1 } },
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

  it("tells a number that may have a fraction (float_type) from an integer (int_type), wherever it sits", () => {
    const limits = z.strictObject({
      spend: z.strictObject({ day: z.number().min(0.01).optional() }).optional(),
      day: z.int().optional(),
      weights: z.array(z.number().nullable()).optional(),
      rates: z.record(z.string(), z.number()).optional(),
    });
    expect(
      issuesFor({ spend: { day: "abc" }, day: "abc", weights: [1, "x"], rates: { a: "y" } }, limits),
    ).toEqual([
      {
        loc: ["body", "spend", "day"],
        type: "float_type",
        msg: "Input should be a valid number",
        input: "abc",
      },
      { loc: ["body", "day"], type: "int_type", msg: "Input should be a valid integer", input: "abc" },
      { loc: ["body", "weights", 1], type: "float_type", msg: "Input should be a valid number", input: "x" },
      { loc: ["body", "rates", "a"], type: "float_type", msg: "Input should be a valid number", input: "y" },
    ]);
  });

  it("says what is wrong with a record's key (too long), at that key, echoing it", () => {
    const tags = z.strictObject({ tags: z.record(z.string().max(4), z.string()) });
    expect(issuesFor({ tags: { ok: "a", toolong: "b" } }, tags)).toEqual([
      {
        loc: ["body", "tags", "toolong"],
        type: "string_too_long",
        msg: "String should have at most 4 characters",
        input: "toolong",
        ctx: { max_length: 4 },
      },
    ]);
  });

  it("reads a query's whole number from its digits, and echoes anything else as it was sent", () => {
    const query = z.object({ limit: queryInt(z.int().min(1).max(100)).default(20) });
    expect(validate("query", query, { limit: "7" })).toEqual({ limit: 7 });
    expect(validate("query", query, {})).toEqual({ limit: 20 });
    for (const [limit, type] of [
      ["abc", "int_type"],
      ["", "int_type"],
      ["1.5", "int_type"],
      [["1", "2"], "int_type"],
      ["0", "greater_than_equal"],
    ] as const) {
      const issues = issuesFor({ limit }, query);
      expect(issues, JSON.stringify(limit)).toEqual([
        expect.objectContaining({ loc: ["body", "limit"], type, input: type === "int_type" ? limit : 0 }),
      ]);
    }
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

describe("fields that may hold a secret are never echoed", () => {
  const token = secretField(
    z
      .string()
      .min(8)
      .max(16)
      .regex(/^[a-z]+$/),
  );
  const credential = z.discriminatedUnion("type", [
    z.strictObject({ type: z.literal("bearer"), token }),
    z.strictObject({ type: z.literal("header"), name: z.string().min(1), value: token }),
  ]);
  const body = z.strictObject({
    label: z.string().max(3),
    credential: credential.optional(),
    nested: z.array(z.strictObject({ token: token.optional() })).optional(),
  });
  const SECRET = "hunterhunterhunterhunter";
  const issues = (value: unknown, against: z.ZodType = body) => issuesFor(value, against);

  it("a secret field that fails is located and typed as any other, without its input", () => {
    expect(issues({ label: "abcd", credential: { type: "bearer", token: SECRET } })).toEqual([
      {
        loc: ["body", "label"],
        msg: "String should have at most 3 characters",
        type: "string_too_long",
        input: "abcd",
        ctx: { max_length: 3 },
      },
      {
        loc: ["body", "credential", "token"],
        msg: "String should have at most 16 characters",
        type: "string_too_long",
        ctx: { max_length: 16 },
      },
    ]);
    const [header] = issues({ label: "a", credential: { type: "header", name: "X-Key", value: 42 } });
    expect(header).toEqual({
      loc: ["body", "credential", "value"],
      msg: "Input should be a valid string",
      type: "string_type",
    });
    const [inArray] = issues({ label: "a", nested: [{}, { token: SECRET }] });
    expect(inArray).toMatchObject({ loc: ["body", "nested", 1, "token"] });
    expect(inArray).not.toHaveProperty("input");
  });

  it("nor is what holds one: an object that fails as a whole, or the unknown fields beside a secret (a misspelt one)", () => {
    const all = [
      ...issues({ label: "a", credential: { type: "bearer", token: "short", tokn: SECRET } }),
      ...issues({ label: "a", credential: { type: "other", token: SECRET } }),
      ...issues({ label: "a", credential: { token: SECRET } }),
      ...issues(
        { token: SECRET, twice: SECRET },
        z.strictObject({ token, twice: z.string() }).refine((v) => v.token !== v.twice, "Value error, twice"),
      ),
    ];
    expect(all.length).toBeGreaterThanOrEqual(5);
    expect(JSON.stringify(all)).not.toContain(SECRET);
    // What holds no secret is echoed as before.
    expect(issues({ label: "abcd", extra: "visible" })).toEqual([
      expect.objectContaining({ loc: ["body", "label"], input: "abcd" }),
      expect.objectContaining({ loc: ["body", "extra"], input: "visible" }),
    ]);
  });

  it("nor a value of another shape where what holds a secret was due (the secret in a list, or alone)", () => {
    const all = [
      ...issues([SECRET]),
      ...issues(SECRET),
      ...issues({ label: "a", credential: [SECRET] }),
      ...issues({ label: "a", credential: SECRET }),
      ...issues({ label: "a", nested: { token: SECRET } }),
    ];
    expect(all.map((i) => i.type)).toEqual(["dict_type", "dict_type", "dict_type", "dict_type", "list_type"]);
    expect(JSON.stringify(all)).not.toContain(SECRET);
    // A value of another shape where nothing secret was due is still echoed.
    expect(issues({ label: ["abc"] })).toEqual([
      expect.objectContaining({ loc: ["body", "label"], input: ["abc"] }),
    ]);
  });

  it("also inside a schema picked by looking at the value (`choosing`)", () => {
    const picked = z.unknown().transform((value, ctx) => {
      const result = credential.safeParse(value, { reportInput: true });
      if (result.success) return result.data;
      for (const issue of result.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
      return z.NEVER;
    });
    const schema = z.strictObject({ tools: z.array(choosing(picked, () => credential)) });
    const found = issues({ tools: [{ type: "bearer", token: SECRET }] }, schema);
    expect(found).toEqual([
      expect.objectContaining({ loc: ["body", "tools", 0, "token"], type: "string_too_long" }),
    ]);
    expect(JSON.stringify(found)).not.toContain(SECRET);
  });

  it("shows secret fields writeOnly in the OpenAPI document", () => {
    expect(z.toJSONSchema(z.object({ token }))).toMatchObject({ properties: { token: { writeOnly: true } } });
  });
});
