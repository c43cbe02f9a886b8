import type { ChatRequest } from "./chat.ts";
import type { EmbeddingRequest } from "./embeddings.ts";
import { OpenAIProvider } from "./openai.ts";
import type { Endpoint } from "./transport.ts";

/**
 * The adapter of Azure OpenAI for one deployment: the chat-completions wire
 * of OpenAI, sent to the Azure deployment named by the catalogue's `model`,
 * `POST {base_url}/openai/deployments/{model}/chat/completions?api-version=…`,
 * with its key in the `api-key` header (Azure's "Data plane - inference"
 * REST API); embeddings likewise, at `…/deployments/{model}/embeddings?api-version=…`.
 * `base_url` is the resource's endpoint (`https://NAME.openai.azure.com`).
 */
export class AzureOpenAIProvider extends OpenAIProvider {
  protected override endpoint(request: ChatRequest): Endpoint {
    return this.deploymentEndpoint(request.model, "chat/completions");
  }

  protected override embeddingsEndpoint(request: EmbeddingRequest): Endpoint {
    return this.deploymentEndpoint(request.model, "embeddings");
  }

  private deploymentEndpoint(model: string, operation: string): Endpoint {
    const { apiKey, apiVersion } = this.deployment;
    const deployment = encodeURIComponent(model);
    return {
      path: `/openai/deployments/${deployment}/${operation}?api-version=${encodeURIComponent(apiVersion ?? "")}`,
      headers: apiKey ? { "api-key": apiKey } : {},
    };
  }
}
