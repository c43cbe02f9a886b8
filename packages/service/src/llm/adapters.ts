import { AzureOpenAIProvider } from "./azure.ts";
import type { ProviderKind } from "./catalogue.ts";
import { OpenAIProvider } from "./openai.ts";
import type { AdapterFactory } from "./provider.ts";

/**
 * One adapter per provider kind, each in its own file: adding a provider is
 * a new file and a line here. A kind without an adapter is refused at start
 * when the catalogue names it (`MODELS_FILE`'s configuration error).
 */
export const ADAPTERS: Readonly<Record<ProviderKind, AdapterFactory | undefined>> = {
  openai: (deployment, options) => new OpenAIProvider(deployment, options),
  azure: (deployment, options) => new AzureOpenAIProvider(deployment, options),
  // The Messages API adapter (llm/anthropic.ts) goes here, as the two above.
  anthropic: undefined,
};

/** The provider kinds this build can call. */
export const ADAPTER_KINDS = (Object.keys(ADAPTERS) as ProviderKind[]).filter((kind) => ADAPTERS[kind]);
