import type { CallRoute, ServedBy } from "./chat.ts";
import { ProviderFailed } from "./errors.ts";

/** An embeddings call in the service's own terms (what the pipeline, budgets and usage see), whatever the wire. */

/** One call to embed texts (or token arrays), in OpenAI's embeddings terms. */
export interface EmbeddingRequest {
  /** A catalogue name; an adapter is handed the upstream's own model id here. */
  model: string;
  /** Unset: the model's own deployments only, no fallback. */
  route?: CallRoute | undefined;
  /** The inputs, each a text or an array of token ids, in order; never empty. */
  input: readonly string[] | readonly (readonly number[])[];
  /** The vectors' width asked for (models that can shorten theirs: `text-embedding-3-*`). */
  dimensions?: number | undefined;
  /** The caller's end-user id, passed on as `user`. */
  user?: string | undefined;
}

/** What a provider answered: one vector per input, in the inputs' order. */
export interface Embeddings {
  /** Each input's vector, as float32 (what providers compute and what `base64` carries). */
  vectors: Float32Array[];
  /** The model that answered, as the provider names it. */
  model: string;
  /** Input tokens, as the provider reported them (else as counted for admission). */
  inputTokens: number | undefined;
  /** The deployment that answered (the router sets it; adapters leave it unset). */
  servedBy?: ServedBy | undefined;
}

/** An embedding as OpenAI's answer carries it: floats, or base64 of little-endian float32s. */
type WireEmbedding = { index?: unknown; embedding?: unknown };

/** Vectors of little-endian float32s, as `encoding_format: base64` carries them. */
export function float32sOfBase64(text: string): Float32Array | undefined {
  const bytes = Buffer.from(text, "base64");
  if (bytes.length % 4 !== 0) return undefined;
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/** `vector` as `encoding_format: base64` carries it: little-endian float32s, whatever this machine's order. */
export function base64OfFloat32s(vector: Float32Array): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i]!, i * 4);
  return bytes.toString("base64");
}

/**
 * The vectors of a provider's embeddings answer (`{data: [{index, embedding}], model, usage}`),
 * checked: one per input, each index once, every vector of one width, the
 * width asked for when `dimensions` was, finite numbers only. A provider that
 * ignored `encoding_format: base64` and sent floats is read as well.
 * Anything else is the provider's failure (`ProviderFailed`), never the caller's.
 */
export function embeddingsOf(
  body: unknown,
  request: Pick<EmbeddingRequest, "model" | "input" | "dimensions">,
): Omit<Embeddings, "servedBy"> {
  const answer = body as { data?: unknown; model?: unknown; usage?: { prompt_tokens?: unknown } } | null;
  const data = answer?.data;
  const count = request.input.length;
  if (!Array.isArray(data) || data.length !== count)
    throw new ProviderFailed(
      `it answered ${Array.isArray(data) ? data.length : "no"} embeddings for ${count} inputs`,
    );
  const vectors: (Float32Array | undefined)[] = new Array(count);
  let width: number | undefined;
  for (const [position, item] of (data as WireEmbedding[]).entries()) {
    const index = item?.index ?? position;
    if (
      !Number.isInteger(index) ||
      (index as number) < 0 ||
      (index as number) >= count ||
      vectors[index as number]
    )
      throw new ProviderFailed("it answered embeddings whose indexes are not each input's once");
    const vector = vectorOf(item?.embedding);
    if (!vector) throw new ProviderFailed("it answered an embedding that is not a vector of numbers");
    width ??= vector.length;
    if (vector.length !== width || width === 0)
      throw new ProviderFailed("it answered embeddings of different widths");
    vectors[index as number] = vector;
  }
  if (request.dimensions !== undefined && width !== request.dimensions)
    throw new ProviderFailed(
      `it answered vectors of ${width} dimensions, not the ${request.dimensions} asked for`,
    );
  const reported = answer?.usage?.prompt_tokens;
  return {
    vectors: vectors as Float32Array[],
    model: typeof answer?.model === "string" && answer.model ? answer.model : request.model,
    inputTokens: Number.isInteger(reported) && (reported as number) >= 0 ? (reported as number) : undefined,
  };
}

function vectorOf(embedding: unknown): Float32Array | undefined {
  if (typeof embedding === "string") {
    const vector = float32sOfBase64(embedding);
    return vector?.every(Number.isFinite) ? vector : undefined;
  }
  if (!Array.isArray(embedding) || !embedding.every((x) => typeof x === "number")) return undefined;
  // A number past float32's range is no float32 either.
  const vector = Float32Array.from(embedding as number[]);
  return vector.every(Number.isFinite) ? vector : undefined;
}
