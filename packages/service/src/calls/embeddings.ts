import { AppError, ValidationFailed, type ValidationIssue } from "@gw/core/errors";
import { validate } from "@gw/core/validation";
import type { WindowState } from "@gw/core/windows";
import { z } from "zod";
import { admitModelCall, type BudgetDeps, type Caller } from "../budgets/admit-model-call.ts";
import {
  embeddingInput,
  MAX_EMBEDDING_INPUT_TOKENS,
  MAX_EMBEDDING_REQUEST_TOKENS,
} from "../embeddings/request.ts";
import { routeOf } from "../llm/models.ts";
import type { ChatProvider, EmbeddingRequest, ServedBy } from "../llm/provider.ts";
import { countEachTokens, tokenizerOf } from "../llm/tokens.ts";
import type { UsageStore } from "../usage/store.ts";
import { recordUsage } from "./model-call.ts";

/**
 * Embeddings through the one model-call pipeline (calls/model-call.ts),
 * whoever asks: `POST /api/v1/llm/embeddings`, and the service's own code
 * that embeds on a caller's behalf (a vector store's ingestion). The model
 * name is routed as every call's is (the key's allowlist, fallbacks it may
 * use, retries and cooldowns: llm/router.ts); the inputs are counted and
 * reserved under the caller's budgets (input tokens at the highest price
 * among the deployments the call may reach, no output), settled at the
 * price of the deployment that answered, and recorded as the caller's usage.
 */

export interface EmbeddingCallDeps {
  provider: ChatProvider;
  usage: UsageStore;
  budgets: BudgetDeps;
}

/** What to embed, as `embedTexts` takes it. */
export interface EmbedTextsInput {
  /** A catalogue name (`text-embedding-3-small`); the caller's key must be allowed it. */
  model: string;
  /**
   * One text or several (OpenAI's limits: at most 2,048, none empty, each at
   * most 8,192 tokens, 300,000 in all); token ids (one input) or token
   * arrays are taken too.
   */
  input: string | readonly string[] | readonly number[] | readonly (readonly number[])[];
  /** The vectors' width, for models that can shorten theirs (`text-embedding-3-*`). */
  dimensions?: number | undefined;
  /** An end-user id passed on to the provider (OpenAI's `user`). */
  user?: string | undefined;
}

/** The answer of `embedTexts`. */
export interface EmbeddedTexts {
  /** One vector per input, in the inputs' order, as float32s; all of one width. */
  vectors: Float32Array[];
  /** The model that answered, as the provider names it. */
  model: string;
  /** Input tokens charged: as the provider reported them, else as counted. */
  usage: { prompt_tokens: number; total_tokens: number };
  /** The deployment that answered. */
  servedBy: ServedBy | undefined;
  /** The budget windows after the reservation (an HTTP answer's rate-limit headers); none without budgets. */
  windows: WindowState[];
}

/**
 * Embeds `input` with `model` for `caller` (its principal and key limits, as
 * the pipeline takes them: `Caller`). Throws the catalogue's errors: 422 for
 * an input out of bounds or a model the service does not offer, 403 for a
 * model the key may not use (or an unpriced one under a spend limit), 400
 * for a model none of whose deployments can embed (an Anthropic one), 429
 * when a budget refuses, the provider's errors (502, 504, 429) when every
 * deployment failed. `signal` aborting (the caller gone) stops the provider
 * call; what the provider may have read is then charged.
 */
export async function embedTexts(
  deps: EmbeddingCallDeps,
  caller: Caller,
  input: EmbedTextsInput,
  signal: AbortSignal = new AbortController().signal,
): Promise<EmbeddedTexts> {
  const { principal } = caller;
  deps.provider.assertConfigured();
  const given = validate("body", z.object({ input: embeddingInput }), { input: input.input }).input;
  const inputs = inputsOf(given);
  const { model, route } = routeOf(deps.provider, principal, input.model, "embedding");
  if (!deps.provider.canEmbed([model, ...route.fallbacks]))
    throw new AppError(
      "bad_request",
      `The model '${model}' cannot make embeddings: none of its deployments' providers has an embeddings API`,
      { param: "model" },
    );
  const single = typeof given === "string" || typeof given[0] === "number";
  const counts = await tokensOfInputs(model, inputs, single, principal.org);
  const request: EmbeddingRequest = {
    model,
    route: { fallbacks: route.fallbacks, caller: { principal, requestId: caller.requestId ?? "" } },
    input: inputs,
    dimensions: input.dimensions,
    user: input.user,
  };
  const counted = counts.reduce((n, c) => n + c, 0);
  const admitted = await admitModelCall(
    deps.budgets,
    caller,
    { model, route: request.route, maxOutputTokens: 0 },
    async () => counted,
  );
  let embedded: Awaited<ReturnType<ChatProvider["embed"]>>;
  try {
    embedded = await deps.provider.embed(request, signal);
  } catch (err) {
    if (signal.aborted) {
      // The caller went away while the provider worked: it may have read every input.
      const used = { input_tokens: counted, output_tokens: 0, total_tokens: counted };
      await Promise.all([
        admitted.settle(used),
        recordUsage(deps.usage, principal, model, used, { price: admitted.reservedPrice }),
      ]);
    } else await admitted.release();
    throw err;
  }
  const tokens = embedded.inputTokens ?? counted;
  const used = { input_tokens: tokens, output_tokens: 0, total_tokens: tokens };
  await Promise.all([
    admitted.settle(used, embedded.servedBy),
    recordUsage(deps.usage, principal, embedded.model, used, { servedBy: embedded.servedBy }),
  ]);
  return {
    vectors: embedded.vectors,
    model: embedded.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
    servedBy: embedded.servedBy,
    windows: admitted.windows,
  };
}

/** The inputs as a list: one string or one token array is a list of one. */
export function inputsOf(input: string | readonly unknown[]): string[] | number[][] {
  if (typeof input === "string") return [input];
  if (typeof input[0] === "number") return [input as number[]];
  return input as string[] | number[][];
}

/**
 * Each input's tokens: a token array's length, a text's count for the model
 * (llm/tokens.ts). OpenAI's limits (`MAX_EMBEDDING_INPUT_TOKENS` an input,
 * `MAX_EMBEDDING_REQUEST_TOKENS` in all) are checked where the count is
 * exact: token arrays, and texts for a model whose tokenizer the service
 * knows (OpenAI's `text-embedding-*`); for another, the count is an upper
 * bound (UTF-8 bytes), so its provider keeps its own limits.
 */
async function tokensOfInputs(
  model: string,
  inputs: string[] | number[][],
  /** The request gave one input (a string, or one token array), not a list. */
  single: boolean,
  tenant: string,
): Promise<number[]> {
  const texts = inputs.filter((i): i is string => typeof i === "string");
  const textCounts = texts.length ? await countEachTokens(model, texts, tenant) : [];
  const exact = texts.length === 0 || tokenizerOf(model) !== "utf8_bytes";
  let t = 0;
  const counts = inputs.map((i) => (typeof i === "string" ? textCounts[t++]! : i.length));
  if (!exact) return counts;
  const issues: ValidationIssue[] = [];
  for (const [index, count] of counts.entries())
    if (count > MAX_EMBEDDING_INPUT_TOKENS)
      issues.push({
        loc: single ? ["body", "input"] : ["body", "input", index],
        msg: `Input should have at most ${MAX_EMBEDDING_INPUT_TOKENS} tokens, not ${count}`,
        type: "too_long",
        ctx: { max_tokens: MAX_EMBEDDING_INPUT_TOKENS },
      });
  const total = counts.reduce((n, c) => n + c, 0);
  if (issues.length === 0 && total > MAX_EMBEDDING_REQUEST_TOKENS)
    issues.push({
      loc: ["body", "input"],
      msg: `Inputs should have at most ${MAX_EMBEDDING_REQUEST_TOKENS} tokens in all, not ${total}`,
      type: "too_long",
      ctx: { max_tokens: MAX_EMBEDDING_REQUEST_TOKENS },
    });
  if (issues.length > 0) throw new ValidationFailed(issues);
  return counts;
}
