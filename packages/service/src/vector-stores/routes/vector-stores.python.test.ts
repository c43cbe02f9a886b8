import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pythonWith } from "@gw/test-kit/python-venv";
import { describe, expect, it } from "vitest";
import { useVectorStack } from "../../../test/vector-stores.ts";

const run = promisify(execFile);
// The version the drop-in tests pin (test/e2e/openai-python.ts).
const OPENAI_PYTHON = "openai==3.22.1";
const { stack } = useVectorStack();

describe("openai-python", () => {
  it("vector_stores.create and vector_stores.files.upload_and_poll, each object of the SDK's own type", async (ctx) => {
    const env = await pythonWith([OPENAI_PYTHON]);
    if ("skip" in env) {
      process.stderr.write(`SKIPPED the openai-python test: ${env.skip}; .ci/run installs it\n`);
      ctx.skip(env.skip);
      return;
    }
    const key = await stack.createKey();
    const script = fileURLToPath(new URL("./vector_stores_python.py", import.meta.url));
    const result = await run(env.python, ["-W", "ignore::UserWarning", script], {
      env: { ...process.env, GATEWAY_URL: stack.gatewayUrl, GATEWAY_KEY: key.secret },
      timeout: 120_000,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code ?? -1,
        stdout: err.stdout ?? "",
        stderr: err.stderr ?? String(err),
      }),
    );
    expect({ code: result.code, stderr: result.code === 0 ? "" : result.stderr }).toEqual({
      code: 0,
      stderr: "",
    });
    expect(result.stdout.match(/^ok /gm)).toHaveLength(2);
  }, 600_000);
});
