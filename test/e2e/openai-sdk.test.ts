import { describe } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";
import { openaiSdkCases } from "./openai-sdk.ts";

/** The official `openai` SDK against gateway + service + Redis + SpiceDB + the test provider, in process. */
describe("the OpenAI SDK", () => {
  const stack = useStack();
  openaiSdkCases(() => ({
    gatewayUrl: stack.gatewayUrl,
    llm: stack.llm,
    createKey: (input) => stack.createKey(input as Parameters<typeof stack.createKey>[0]),
  }));
});
