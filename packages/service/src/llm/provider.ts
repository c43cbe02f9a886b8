import type { Dispatcher } from "undici";
import type { Ids } from "../ids.ts";
import type { Deployment, ModelMode } from "./catalogue.ts";
import type { ChatRequest, Completion, ServedBy, ToolCallDelta } from "./chat.ts";
import type { EmbeddingRequest, Embeddings } from "./embeddings.ts";

// The model call's parts: the call in the service's terms (chat.ts), the catalogue of names and
// deployments (catalogue.ts), one adapter per provider kind (adapters.ts: openai.ts, azure.ts, anthropic.ts) over
// their transport (transport.ts, sse.ts), the router across deployments (router.ts, cooldowns.ts) and
// the accounting (accounting.ts).
export { charsOf, estimateTokens, usageOf } from "./accounting.ts";
export type {
  CallRoute,
  ChatMessage,
  ChatRequest,
  Completion,
  CompletionChoice,
  FinishReason,
  FunctionTool,
  ProviderField,
  ServedBy,
  TokenLogprob,
  ToolCall,
  ToolCallDelta,
  Usage,
} from "./chat.ts";
export { fromTextParts, textParts } from "./chat.ts";
export type { EmbeddingRequest, Embeddings } from "./embeddings.ts";

/** What a stream tells its reader before its first piece: the model that answers, and where from. */
export interface StreamSeen {
  /** The model that answers, as the provider names it, from its first chunk on. */
  model?: string;
  /** The deployment that serves the stream (set by the router once it committed to one). */
  servedBy?: ServedBy;
}

/**
 * One provider kind's adapter for one deployment: a call in the service's
 * terms over the provider's own wire. `request.model` is the upstream's own
 * model id. Failures are `ProviderError`s (llm/errors.ts), their provider
 * text redacted of the deployment's key.
 */
export interface ModelProvider {
  complete(request: ChatRequest, signal: AbortSignal): Promise<Completion>;
  /**
   * Yields the answer as it comes: text pieces as strings, pieces of tool
   * calls as `ToolCallDelta`s (a call's first piece is held back until its
   * name is known); returns the completion when the provider is done.
   * `seen.model` is the model that answers, as the provider names it, from
   * its first chunk on (so a stream can name it before the first piece).
   */
  stream(
    request: ChatRequest,
    signal: AbortSignal,
    seen?: { model?: string },
  ): AsyncGenerator<string | ToolCallDelta, Completion>;
  /**
   * Embeds the request's inputs (`request.model` the upstream's own id);
   * absent for a provider kind without an embeddings API (Anthropic's): the
   * router never sends an embeddings call to its deployments.
   */
  embed?(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings>;
}

/** What every adapter shares, whatever its deployment. */
export interface AdapterOptions {
  /** Largest answer read: a JSON body, or the text of a streamed answer. */
  maxResponseBytes: number;
  /** Largest single event of a stream. */
  maxEventChars: number;
  /** Largest embeddings answer read (a batch of vectors); unset: `maxResponseBytes`. */
  maxEmbeddingsResponseBytes?: number | undefined;
  /** Issues the ids of tool calls the provider sent without one (the process's clock stamps them). */
  ids: Ids;
  /** Every deployment's key: replaced by `[redacted]` in whatever of any provider's text reaches the log. */
  secrets?: readonly string[] | undefined;
  /**
   * The only dispatcher that may connect to the deployment's base URL: set
   * when it is the one an organization gave with its own key (each
   * connection checked where it resolves, llm/provider-keys.ts).
   */
  dispatcher?: Dispatcher | undefined;
}

/** Makes the adapter of a deployment (its key may be an organization's own: `byok`). */
export type AdapterFactory = (deployment: Deployment, options: AdapterOptions) => ModelProvider;

/**
 * What every model call goes through (`deps.provider`): the catalogue's
 * names resolved, and each call routed across the deployments and fallbacks
 * of its name (llm/router.ts). Its `complete` and `stream` take a catalogue
 * name in `request.model`; the completion says which deployment served it
 * (`servedBy`).
 */
export interface ChatProvider {
  complete(request: ChatRequest, signal: AbortSignal): Promise<Completion>;
  stream(
    request: ChatRequest,
    signal: AbortSignal,
    seen?: StreamSeen,
  ): AsyncGenerator<string | ToolCallDelta, Completion>;
  /**
   * Embeds `request.input` with the deployments of the catalogue name
   * `request.model` (and its fallbacks) whose provider has an embeddings
   * API; the answer says which deployment served it (`servedBy`).
   */
  embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings>;
  /**
   * Refuses (400, the field named) a chat call that sets a field no
   * deployment it may reach can take (`n`, penalties, `logit_bias`,
   * logprobs on Anthropic's: llm/fields.ts); those that cannot are passed
   * over when others can. Called before anything is reserved.
   */
  assertTakes(request: ChatRequest): void;
  /** Whether a deployment of one of `names` can make embeddings (its provider kind has an embeddings API). */
  canEmbed(names: readonly string[]): boolean;
  /** The model to call for `requested`: `auto` is the default; others must be in the catalogue. `undefined` if not. */
  resolveModel(requested: string): string | undefined;
  /** The names callers may ask for; undefined: any (the shorthand without `LLM_MODELS`). */
  readonly allowedModels: readonly string[] | undefined;
  /** The model of `auto`. */
  readonly defaultModel: string | undefined;
  /** Fails fast, before any state is created, when no provider is configured. */
  assertConfigured(): void;
  /** The names a call for `model` may reach, in order, within a key's allowlist (`undefined`: any). */
  reachable(model: string, allowed: readonly string[] | undefined): string[];
  /** Who `GET /models` says owns `model` (`development` for the development provider of `pnpm start`). */
  ownedBy(model: string): string;
  /** What `model` is for (chat or embeddings), when the catalogue says. */
  modeOf(model: string): ModelMode | undefined;
}
