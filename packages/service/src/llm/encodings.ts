/**
 * gpt-tokenizer's encodings, each loaded the first time it is used. Loaded
 * together, o200k_base and cl100k_base take about 90 MB of a process's memory
 * (43 MB of it heap, which every full garbage collection then marks) and 0.2 s
 * of CPU at start: a service that never counts tokens (no token budget) nor
 * chunks a file for a vector store should not pay for them. Nothing else
 * imports gpt-tokenizer (`encodings.test.ts` checks), so one copy of each is
 * ever loaded.
 */
import { createRequire } from "node:module";

export type EncodingName = "o200k_base" | "cl100k_base";

/** What an encoding module offers (both have the same interface). */
export type Encoding = typeof import("gpt-tokenizer/encoding/o200k_base");

const load = createRequire(import.meta.url);
const loaded = new Map<EncodingName, { encoding: Encoding; split: RegExp }>();

function entry(name: EncodingName) {
  let found = loaded.get(name);
  if (!found) {
    const constants = load(
      "gpt-tokenizer/encodingParams/constants",
    ) as typeof import("gpt-tokenizer/encodingParams/constants");
    found = {
      encoding: load(`gpt-tokenizer/encoding/${name}`) as Encoding,
      split: name === "o200k_base" ? constants.O200K_TOKEN_SPLIT_REGEX : constants.CL100K_TOKEN_SPLIT_REGEX,
    };
    loaded.set(name, found);
  }
  return found;
}

/** The encoding `name` (loaded now if it is the first use). */
export const encoding = (name: EncodingName): Encoding => entry(name).encoding;

/** The regular expression that cuts a text into the pieces `name` encodes one by one. */
export const piecePattern = (name: EncodingName): RegExp => entry(name).split;
