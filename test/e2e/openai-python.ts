import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pythonWith } from "@gw/test-kit/python-venv";
import { expect, it } from "vitest";
import type { SdkTarget } from "./openai-sdk.ts";

const run = promisify(execFile);

/** The openai-python version driven, pinned like the npm clients. */
export const OPENAI_PYTHON = "openai==3.22.1";

/**
 * openai-python against the gateway: `openai_python.py` runs its cases
 * (responses, streams, tools, conversations, chat completions with
 * `model_dump()` sent back, `parse`, stored completions, models, input
 * tokens, files, errors), validating every object with the SDK's pydantic types.
 * Its Python environment is made from the registry by the test kit; without
 * a `python3` on the machine the case is skipped, saying so.
 */
export function openaiPythonCases(target: () => SdkTarget): void {
  it("openai-python: every case of openai_python.py passes", async (ctx) => {
    const env = await pythonWith([OPENAI_PYTHON]);
    if ("skip" in env) {
      process.stderr.write(`SKIPPED the openai-python test: ${env.skip}; .ci/run installs it\n`);
      ctx.skip(env.skip);
      return;
    }
    const key = await target().createKey();
    const limited = await target().createKey({ limits: { minute: 2 } });
    const script = fileURLToPath(new URL("./openai_python.py", import.meta.url));
    const result = await run(env.python, ["-W", "ignore::UserWarning", script], {
      env: {
        ...process.env,
        GATEWAY_URL: target().gatewayUrl,
        GATEWAY_KEY: key.secret,
        LIMITED_KEY: limited.secret,
      },
      timeout: 120_000,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code ?? -1,
        stdout: err.stdout ?? "",
        stderr: err.stderr ?? String(err),
      }),
    );
    // On a failure, the traceback says which case and why.
    expect({ code: result.code, stderr: result.code === 0 ? "" : result.stderr }).toEqual({
      code: 0,
      stderr: "",
    });
    expect(result.stdout).toMatch(/^openai-python 3\.22\.1: all cases passed$/m);
    expect(result.stdout.match(/^ok /gm)).toHaveLength(11);
  }, 600_000);
}
