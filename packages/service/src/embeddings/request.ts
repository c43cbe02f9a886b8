import { documentedAs, jsonSchemaOf } from "@gw/core/openapi";
import { storableText } from "@gw/core/validation";
import { z } from "zod";
import { chosen } from "../schema.ts";

/**
 * The body of `POST /api/v1/llm/embeddings`, as OpenAI's API takes it
 * (`CreateEmbeddingRequest`), with OpenAI's limits checked here, before
 * anything is counted or sent (docs/api/embeddings.md): at most
 * `MAX_EMBEDDING_INPUTS` inputs, none empty; each input's tokens and their
 * sum are checked once counted (`calls/embeddings.ts`).
 */

/** Inputs in one request, as OpenAI allows. */
export const MAX_EMBEDDING_INPUTS = 2048;
/** Tokens of one input, as OpenAI allows for every embedding model. */
export const MAX_EMBEDDING_INPUT_TOKENS = 8192;
/** Tokens of all inputs of one request together, as OpenAI allows. */
export const MAX_EMBEDDING_REQUEST_TOKENS = 300_000;
/** The largest token id taken: above every id of OpenAI's encodings (o200k_base has about 200,000). */
const MAX_TOKEN_ID = 1_000_000;

/** A text to embed: not empty (OpenAI refuses an empty string), storable as UTF-8. */
const text = storableText(z.string().min(1));
const tokenId = z.int().min(0).max(MAX_TOKEN_ID);
/** One input given as token ids. */
const tokens = z.array(tokenId).min(1).max(MAX_EMBEDDING_INPUT_TOKENS);
const texts = z.array(text).min(1).max(MAX_EMBEDDING_INPUTS);
const tokenArrays = z.array(tokens).min(1).max(MAX_EMBEDDING_INPUTS);

/** A string, an array of strings, an array of token ids, or an array of token arrays, told apart by their first item. */
export const embeddingInput = documentedAs(
  chosen((v) => {
    if (typeof v === "string") return text;
    if (!Array.isArray(v)) return texts;
    const first = v[0];
    if (typeof first === "number") return tokens;
    if (Array.isArray(first)) return tokenArrays;
    return texts;
  }),
  () => ({
    description:
      "A string, an array of strings, an array of token ids (one input), or an array of token arrays; at most 2,048 inputs, none empty, each at most 8,192 tokens, 300,000 tokens in all",
    anyOf: [text, texts, tokens, tokenArrays].map((s) => jsonSchemaOf(s)),
  }),
);

export const createEmbeddingBody = z.strictObject({
  // Required, as OpenAI's: an embedding model is never the default (`auto`) chat model by chance.
  model: storableText(z.string().min(1).max(256)),
  input: embeddingInput,
  dimensions: z.int().min(1).max(65_536).optional(),
  encoding_format: z.enum(["float", "base64"]).default("float"),
  user: z.string().max(256).optional(),
});

export type CreateEmbeddingInput = z.output<typeof createEmbeddingBody>;
