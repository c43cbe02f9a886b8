import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { encoding, piecePattern } from "./encodings.ts";

const run = promisify(execFile);
const url = (path: string) => pathToFileURL(resolve(import.meta.dirname, path)).href;

describe("the tokenizer's encodings", () => {
  it("are not loaded by the service until a first count, and then only the encoding counted with", async () => {
    // Every module the service loads, by `import` or `require`, seen by a resolve hook in a fresh process.
    const script = `
      import { registerHooks } from "node:module";
      const seen = [];
      registerHooks({
        resolve(specifier, context, next) {
          const found = next(specifier, context);
          if (found.url.includes("gpt-tokenizer")) seen.push(found.url.replace(/^.*gpt-tokenizer/, ""));
          return found;
        },
      });
      await import(${JSON.stringify(url("../server.ts"))});
      await import(${JSON.stringify(url("../vector-stores/ingestion/chunk.ts"))});
      const before = [...seen];
      const { encoding } = await import(${JSON.stringify(url("./encodings.ts"))});
      encoding("cl100k_base").countTokens("hello world");
      console.log(JSON.stringify({ before, after: seen }));
    `;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
      cwd: resolve(import.meta.dirname, "../.."),
    });
    const { before, after } = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      before: string[];
      after: string[];
    };
    expect(before).toEqual([]);
    // The ranks are what weigh: the other encoding's stay unloaded (its small parameters module comes along).
    const ranks = after.filter((u) => u.includes("bpeRanks"));
    expect(ranks).toEqual([expect.stringContaining("bpeRanks/cl100k_base")]);
  });

  it("count as gpt-tokenizer does, and cut text into that encoding's pieces", () => {
    const text = "Hello, world! Let's count 1234 tokens of naïve text.";
    expect(encoding("o200k_base").countTokens(text)).toBe(countTokens(text));
    expect(encoding("o200k_base")).toBe(encoding("o200k_base"));
    const pieces = text.match(new RegExp(piecePattern("o200k_base").source, "gu")) ?? [];
    expect(pieces.join("")).toBe(text);
    expect(pieces.length).toBeGreaterThan(5);
  });
});
