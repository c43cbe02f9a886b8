import { spawn } from "node:child_process";
import { delimiter } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it, vi } from "vitest";
import { processRunning } from "../src/index.ts";

/**
 * PATH as a user's shell has it: under `pnpm test`, `node_modules/.bin` comes first, where `node` is a
 * shell-script shim that would run pnpm itself under a shell that takes the signal meant for pnpm.
 */
const userPath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => !/[\\/]node_modules[\\/]\.bin$/.test(dir))
  .join(delimiter);

describe("the fake provider run by hand", () => {
  it("SIGTERM to `pnpm exec node …/llm-upstream.ts` stops the provider, not only pnpm", async () => {
    const child = spawn("pnpm", ["exec", "node", "packages/test-kit/src/llm-upstream.ts", "0"], {
      cwd: REPO_ROOT,
      env: { ...process.env, PATH: userPath },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    const baseUrl = await vi.waitFor(
      () => {
        const url = /provider at (http:\/\/\S+)/.exec(output)?.[1];
        if (!url) throw new Error(`not listening yet: ${output}`);
        return url;
      },
      { timeout: 20_000, interval: 50 },
    );
    const answered = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(answered.status).toBe(200);

    child.kill("SIGTERM");
    // The provider closes its port and exits: connections are refused from then on.
    await vi.waitFor(
      async () => {
        const refused = await fetch(`${baseUrl}/models`).then(
          () => false,
          () => true,
        );
        if (!refused || !/fake provider stopped/.test(output)) throw new Error("still answering");
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(processRunning(child.pid!)).toBe(false);
  });
});
