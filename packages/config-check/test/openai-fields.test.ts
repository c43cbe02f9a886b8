import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";
import { OPENAI_FIELDS_DOC, openaiFieldProblems } from "../src/openai-fields.ts";

const doc = () => readFile(resolve(REPO_ROOT, OPENAI_FIELDS_DOC), "utf8");

describe("the table of every OpenAI request field", () => {
  it("covers every field of OpenAI's document, as the gateway's schemas treat them", async () => {
    expect(openaiFieldProblems(await doc())).toEqual([]);
  });

  it("fails on a field OpenAI added that the table does not have", async () => {
    const official = (schema: string) =>
      schema === "CreateResponse" ? ["input", "model", "brand_new_field"] : ["messages", "model"];
    const problems = openaiFieldProblems(await doc(), official);
    expect(problems).toContain(
      "docs/api/openai-fields.md: OpenAI's Responses field `brand_new_field` is not in the table",
    );
    expect(problems).toContain(
      "docs/api/openai-fields.md: the gateway takes `temperature` (Responses), which OpenAI's CreateResponse has not",
    );
  });

  it("fails on a cell that says otherwise than the gateway's schema, or says nothing known", async () => {
    const text = (await doc())
      .replace("| `seed` | — | forwarded |", "| `seed` | — | refused |")
      .replace("| `reasoning_effort` | — | forwarded |", "| `reasoning_effort` | — | refused |")
      .replace("| `user` | forwarded | forwarded |", "| `user` | passed on | forwarded |")
      .replace(/^\| `prompt` \|.*$/m, "");
    expect(openaiFieldProblems(text)).toEqual([
      'docs/api/openai-fields.md: `user` (Responses) should start with one of honoured, forwarded, enforced, accepted, refused: "passed on"',
      "docs/api/openai-fields.md: OpenAI's Responses field `prompt` is not in the table",
      "docs/api/openai-fields.md: `reasoning_effort` (Chat Completions) is refused in the table but taken by the gateway's schema",
      "docs/api/openai-fields.md: `seed` (Chat Completions) is refused in the table but taken by the gateway's schema",
    ]);
  });

  it("fails on a field the table says Anthropic deployments cannot take when they can, and the other way round", async () => {
    const text = (await doc())
      .replace(/^(\| `seed` \| — \| forwarded)/m, "$1; not on an Anthropic deployment")
      .replace(
        /^(\| `presence_penalty` \| — \| forwarded \(−2 to 2\)); not on an Anthropic deployment/m,
        "$1",
      );
    expect(openaiFieldProblems(text)).toEqual([
      'docs/api/openai-fields.md: `presence_penalty` (Chat Completions) should say "not on an Anthropic deployment": they cannot take it',
      'docs/api/openai-fields.md: `seed` (Chat Completions) says "not on an Anthropic deployment", but Anthropic deployments take it',
    ]);
  });

  it("takes a field of the other API that the gateway refuses by name, when the table says it is refused", async () => {
    const text = (await doc()).replace(/^\| `n` \| refused[^|]*\|/m, "| `n` | — |");
    expect(openaiFieldProblems(text)).toEqual([
      "docs/api/openai-fields.md: the gateway takes `n` (Responses), which OpenAI's CreateResponse has not",
    ]);
  });
});
