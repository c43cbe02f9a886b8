import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { AppError, ERROR_CATALOGUE, ERROR_CAUSES, type ErrorCause, errorBody } from "../src/errors.ts";
import { ROOT, sources } from "./project-sources.ts";

const DOC = readFileSync(resolve(ROOT, "docs/api/errors.md"), "utf8");

describe("error codes", () => {
  it("every code an error can carry is in docs/api/errors.md, a cause with its status", () => {
    for (const [code, { status }] of Object.entries(ERROR_CATALOGUE))
      expect(DOC, code).toContain(`\`${code}\` (${status})`);
    for (const [cause, code] of Object.entries(ERROR_CAUSES))
      expect(DOC, cause).toMatch(
        new RegExp(`^\\| \`${cause}\` \\| ${ERROR_CATALOGUE[code].status} \\|`, "m"),
      );
  });

  it("every cause the sources throw is one of the listed causes", async () => {
    const thrown = new Set<string>();
    for (const file of await sources()) {
      const text = await readFile(file, "utf8");
      // A cause given to an error's constructor (other `reason` fields, of responses, are not errors).
      for (const m of text.matchAll(
        /\b(?:super|AppError|forbidden|unauthorized)\([^;]*?\breason: "([a-z_]+)"/g,
      ))
        thrown.add(m[1]!);
      // Authentication's refusals, by outcome.
      for (const m of text.matchAll(/^\s+\w+: "([a-z_]+)",$/gm))
        if (text.includes("satisfies Record<string, ErrorCause>")) thrown.add(m[1]!);
    }
    expect(thrown.size).toBeGreaterThan(20);
    for (const cause of thrown) expect(Object.keys(ERROR_CAUSES), cause).toContain(cause);
  });

  it("puts the cause in the body as `code`, else the catalogue code; the contract's bodies stay as they are", () => {
    for (const [cause, code] of Object.entries(ERROR_CAUSES) as [
      ErrorCause,
      keyof typeof ERROR_CATALOGUE,
    ][]) {
      const body = errorBody(new AppError(code, "m", { reason: cause }));
      expect(body).toEqual({ error: ERROR_CATALOGUE[code].title, message: "m", code: cause });
    }
    expect(errorBody(new AppError("not_found", "m"))).toEqual({
      error: "Not Found",
      message: "m",
      code: "not_found",
    });
    expect(errorBody(new AppError("forbidden", "m", { contractBody: true }))).toEqual({
      error: "Forbidden",
      message: "m",
    });
    expect(errorBody(new AppError("rate_limited", "m"))).toEqual({ error: "Rate limit exceeded" });
    // The OpenAI-compatible surface keeps OpenAI's shape, with the catalogue code.
    expect(errorBody(new AppError("conflict", "m", { reason: "last_owner" }), { openai: true })).toEqual({
      error: { message: "m", type: "invalid_request_error", param: null, code: "conflict" },
    });
  });
});
