import { fileURLToPath } from "node:url";
import { runPython, useOpenaiPython } from "@gw/test-kit/python-venv";
import { describe, expect, it } from "vitest";
import { useVectorStack } from "../../../test/vector-stores.ts";

const { stack } = useVectorStack();

describe("openai-python", () => {
  const openaiPython = useOpenaiPython();
  it("vector_stores.create and vector_stores.files.upload_and_poll, each object of the SDK's own type", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await stack.createKey();
    const script = fileURLToPath(new URL("./vector_stores_python.py", import.meta.url));
    const result = await runPython(python, ["-W", "ignore::UserWarning", script], {
      GATEWAY_URL: stack.gatewayUrl,
      GATEWAY_KEY: key.secret,
    });
    expect({ code: result.code, stderr: result.code === 0 ? "" : result.stderr }).toEqual({
      code: 0,
      stderr: "",
    });
    expect(result.stdout.match(/^ok /gm)).toHaveLength(2);
  }, 600_000);
});
