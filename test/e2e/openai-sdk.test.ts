import { describe } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";
import { agentsSdkCases } from "./agents-sdk.ts";
import { aiSdkCases } from "./ai-sdk.ts";
import { langchainCases } from "./langchain.ts";
import { openaiPythonCases } from "./openai-python.ts";
import { openaiSdkCases } from "./openai-sdk.ts";

/** The OpenAI client libraries against the gateway with the service in its process, Redis, SpiceDB and the test provider. */
describe("the OpenAI client libraries", () => {
  // Through the service in the gateway's process (`SERVICE_IN_GATEWAY`); test/e2e/stack.test.ts runs the same
  // cases against `pnpm start`'s two processes.
  const stack = useStack({}, {}, undefined, "single", {}, "in-gateway");
  const target = () => ({
    gatewayUrl: stack.gatewayUrl,
    llm: stack.llm,
    createKey: (input?: Parameters<typeof stack.createKey>[0]) => stack.createKey(input),
  });
  describe("the official openai SDK", () => openaiSdkCases(target));
  describe("the Vercel AI SDK", () => aiSdkCases(target));
  describe("the OpenAI Agents SDK", () => agentsSdkCases(target));
  describe("LangChain JS", () => langchainCases(target));
  describe("openai-python", () => openaiPythonCases(target));
});
