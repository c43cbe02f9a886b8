/**
 * The models of the development provider `pnpm start` runs when no provider
 * is configured (`packages/devstack/src/development-provider.ts`): the
 * provider answers as them, and the service's catalogue knows which of them
 * chat and which embed (`LLM_DEVELOPMENT_PROVIDER`).
 */

/** The chat models it answers as; `pnpm start` routes `auto` to the first. */
export const DEVELOPMENT_MODELS = ["echo"] as const;

/** The embedding models it answers as (what vector stores embed with by default). */
export const DEVELOPMENT_EMBEDDING_MODELS = ["text-embedding-3-small"] as const;

/** Every model it serves, as `GET /v1/models` lists them and `pnpm start` names them in `LLM_MODELS`. */
export const ALL_DEVELOPMENT_MODELS = [...DEVELOPMENT_MODELS, ...DEVELOPMENT_EMBEDDING_MODELS] as const;
