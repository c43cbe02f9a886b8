import type { ChatRequest } from "./chat.ts";
import { OpenAIProvider } from "./openai.ts";
import type { Endpoint } from "./transport.ts";

/**
 * The adapter of Azure OpenAI for one deployment: the chat-completions wire
 * of OpenAI, sent to the Azure deployment named by the catalogue's `model`,
 * `POST {base_url}/openai/deployments/{model}/chat/completions?api-version=…`,
 * with its key in the `api-key` header (Azure's "Data plane - inference"
 * REST API). `base_url` is the resource's endpoint (`https://NAME.openai.azure.com`).
 */
export class AzureOpenAIProvider extends OpenAIProvider {
  protected override endpoint(request: ChatRequest): Endpoint {
    const { apiKey, apiVersion } = this.deployment;
    const deployment = encodeURIComponent(request.model);
    return {
      path: `/openai/deployments/${deployment}/chat/completions?api-version=${encodeURIComponent(apiVersion ?? "")}`,
      headers: apiKey ? { "api-key": apiKey } : {},
    };
  }
}
