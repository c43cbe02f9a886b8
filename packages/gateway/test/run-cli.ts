import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/test-kit";
import { main as authzMain } from "../src/cli/authz.ts";
import { main as keysMain } from "../src/cli/keys.ts";

const run = promisify(execFile);

/** How a test runs a CLI: its `main` in this process (the default), or a process of its own. */
export type CliVia = "in-process" | "node" | "pnpm";

/**
 * Runs one of the operator CLIs (`pnpm keys`, `pnpm authz`): by default its
 * `main` in this process with the given environment, capturing what it prints
 * (the same code a process runs, without a Node start per command); through pnpm
 * or straight on Node as a user would, where the process itself is tested.
 * Never throws, so exit codes can be asserted.
 */
export async function runCli(
  cli: "keys" | "authz",
  args: string[],
  env: NodeJS.ProcessEnv,
  via: CliVia = "in-process",
): Promise<{ code: number; stdout: string; stderr: string }> {
  if (via === "in-process") {
    let stdout = "";
    let stderr = "";
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    };
    const main = cli === "keys" ? keysMain : authzMain;
    try {
      const code = await main(args, { ...process.env, ...env }, io);
      return { code, stdout, stderr };
    } catch (err) {
      // What Node does with an error thrown out of the script: prints it, exits 1.
      return { code: 1, stdout, stderr: `${stderr}${(err as Error).stack ?? String(err)}\n` };
    }
  }
  const [cmd, argv] =
    via === "pnpm"
      ? ["pnpm", ["--silent", cli, ...args]]
      : [process.execPath, [resolve(REPO_ROOT, `packages/gateway/src/cli/${cli}.ts`), ...args]];
  try {
    const { stdout, stderr } = await run(cmd, argv, { cwd: REPO_ROOT, env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
