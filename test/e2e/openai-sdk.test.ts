import { describe } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";
import { agentsSdkCases } from "./agents-sdk.ts";
import { aiSdkCases } from "./ai-sdk.ts";
import { langchainCases } from "./langchain.ts";
import { openaiPythonCases } from "./openai-python.ts";
import { openaiSdkCases } from "./openai-sdk.ts";

/** The OpenAI client libraries against gateway + service + Redis + SpiceDB + the test provider, in process. */
describe("the OpenAI client libraries", () => {
  const stack = useStack();
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
