import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/test-kit";

const run = promisify(execFile);

/**
 * Runs one of the operator CLIs (`pnpm keys`, `pnpm authz`) as a user would,
 * through pnpm or straight on Node; never throws, so exit codes can be asserted.
 */
export async function runCli(
  cli: "keys" | "authz",
  args: string[],
  env: NodeJS.ProcessEnv,
  via: "node" | "pnpm" = "node",
): Promise<{ code: number; stdout: string; stderr: string }> {
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
