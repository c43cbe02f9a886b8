import { fileURLToPath } from "node:url";
import { runPython, useOpenaiPython } from "@gw/test-kit/python-venv";
import { expect, it } from "vitest";
import type { SdkTarget } from "./openai-sdk.ts";

/**
 * openai-python against the gateway: `openai_python.py` runs its cases
 * (responses, streams, tools, conversations, chat completions with
 * `model_dump()` sent back, `parse`, stored completions, models, input
 * tokens, files, errors), validating every object with the SDK's pydantic types.
 * Its Python environment is made from the registry by the test kit; without
 * a `python3` on the machine the case is skipped, saying so.
 */
export function openaiPythonCases(target: () => SdkTarget): void {
  const openaiPython = useOpenaiPython();
  it("openai-python: every case of openai_python.py passes", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await target().createKey();
    const limited = await target().createKey({ limits: { minute: 2 } });
    const script = fileURLToPath(new URL("./openai_python.py", import.meta.url));
    const result = await runPython(python, ["-W", "ignore::UserWarning", script], {
      GATEWAY_URL: target().gatewayUrl,
      GATEWAY_KEY: key.secret,
      LIMITED_KEY: limited.secret,
    });
    // On a failure, the traceback says which case and why.
    expect({ code: result.code, stderr: result.code === 0 ? "" : result.stderr }).toEqual({
      code: 0,
      stderr: "",
    });
    expect(result.stdout).toMatch(/^openai-python 3\.22\.1: all cases passed$/m);
    expect(result.stdout.match(/^ok /gm)).toHaveLength(12);
    // The sampling fields reached the provider as openai-python sent them.
    expect(target().llm.requests.map((r) => r.body)).toContainEqual(
      expect.objectContaining({
        n: 2,
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        logit_bias: { "42": -100 },
      }),
    );
  }, 600_000);
}
