import { AnthropicProvider } from "./anthropic.ts";
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
  // `request.model` is already the deployment's upstream id (the router sets it), so no `model` here.
  anthropic: (deployment, options) =>
    new AnthropicProvider({
      baseUrl: deployment.baseUrl,
      apiKey: deployment.apiKey,
      timeoutMs: deployment.timeoutMs,
      maxResponseBytes: options.maxResponseBytes,
      maxEventChars: options.maxEventChars,
      ids: options.ids,
      secrets: options.secrets,
      dispatcher: options.dispatcher,
      deployment: { id: deployment.id, modelName: deployment.modelName },
    }),
};

/** The provider kinds this build can call. */
export const ADAPTER_KINDS = (Object.keys(ADAPTERS) as ProviderKind[]).filter((kind) => ADAPTERS[kind]);
