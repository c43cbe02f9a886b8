/**
 * A Python virtual environment with packages from the registry, for tests
 * that drive Python client libraries (openai-python): made once per set of
 * packages with the machine's `python3 -m venv`, installed by `pip install`
 * through pip's own configuration (its index, its proxy), and kept in the
 * system's temporary directory for the next run. Made by one process at a
 * time (a lock), in a directory of its own and renamed into place, so test
 * files that ask at once never see a half-made one, nor make one each.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { madeOnce } from "@gw/devstack";
import { beforeAll } from "vitest";

const run = promisify(execFile);

export type PythonEnv = { python: string } | { skip: string };

/** The `python3` on the PATH, or `undefined` when the machine has none. */
async function systemPython(): Promise<string | undefined> {
  try {
    await run("python3", ["--version"]);
    return "python3";
  } catch {
    return undefined;
  }
}

/**
 * A virtual environment's python with `packages` (pip requirement strings,
 * pinned) installed; `{skip}` with the reason only when the machine has no
 * Python. Creating the environment or installing into it failing is an
 * error (on Debian, `python3 -m venv` needs the `python3-venv` package).
 */
export async function pythonWith(packages: string[]): Promise<PythonEnv> {
  const python = await systemPython();
  if (!python) return { skip: "python3 is not installed (apt-get install -y python3 python3-venv)" };
  const id = createHash("sha256").update(packages.join("\n")).digest("hex").slice(0, 16);
  const home = join(tmpdir(), `gw-test-python-${id}`);
  const bin = join(home, "bin", "python");
  // One maker at a time across the run's processes (vitest's global setup starts it, test files that
  // need it wait for it).
  return {
    python: await madeOnce(
      `${home}.lock`,
      async () => (existsSync(bin) ? bin : undefined),
      async () => {
        await make(python, packages, home);
        return bin;
      },
      MAKE_TIMEOUT_MS,
    ),
  };
}

/** How long a Python environment may take to make, pip's install included. */
const MAKE_TIMEOUT_MS = 10 * 60_000;

/** Makes the environment in a directory of its own, then renames it to `home`. */
async function make(python: string, packages: string[], home: string): Promise<void> {
  const bin = join(home, "bin", "python");
  const building = `${home}.${randomBytes(4).toString("hex")}`;
  try {
    await run(python, ["-m", "venv", building]);
    await run(
      join(building, "bin", "pip"),
      ["install", "--quiet", "--disable-pip-version-check", ...packages],
      {
        // One retry per index unless pip's own setting says otherwise: where pip is configured with an
        // index it cannot reach beside one it can (a mirror), its default five retries with back-off
        // took two minutes here for what one retry does in ten seconds.
        env: { ...process.env, PIP_RETRIES: process.env.PIP_RETRIES ?? "1" },
        maxBuffer: 16 * 1024 * 1024,
        timeout: MAKE_TIMEOUT_MS,
      },
    );
    await rename(building, home).catch(async (err) => {
      if (!existsSync(bin)) throw err; // another run made it first: use theirs
      await rm(building, { recursive: true, force: true });
    });
  } catch (err) {
    await rm(building, { recursive: true, force: true });
    const { stderr = "" } = err as { stderr?: string };
    throw new Error(`could not make a Python environment with ${packages.join(" ")}: ${stderr || err}`);
  }
}

/** The openai-python version the drop-in tests drive, pinned like the npm clients. */
export const OPENAI_PYTHON = "openai==3.22.1";

/**
 * For the tests of the enclosing `describe` (or file) that drive openai-python: a `beforeAll`,
 * with a hook timeout as long as making the environment may take, waits for it (vitest's global
 * setup starts making it on a machine that lacks it, so on a fresh machine pip's install may still
 * run), so no test's own timeout is spent on pip. The function it returns gives a test the
 * environment's python; throws why it could not be made (failing that test only, not the others
 * of the `describe`); or gives `undefined` with the test skipped, saying why on stderr, where the
 * machine has no Python (`.ci/run` installs it, so CI never skips).
 */
export function useOpenaiPython(): (ctx: { skip(note?: string): void }) => string | undefined {
  let env: PythonEnv | Error | undefined;
  beforeAll(async () => {
    // Kept, not thrown: an environment that could not be made fails the openai-python cases only.
    env = await pythonWith([OPENAI_PYTHON]).catch((err: Error) => err);
  }, MAKE_TIMEOUT_MS + 60_000);
  return (ctx) => {
    if (!env) throw new Error("useOpenaiPython's beforeAll has not run");
    if (env instanceof Error) throw env;
    if (!("skip" in env)) return env.python;
    process.stderr.write(`SKIPPED the openai-python test: ${env.skip}; .ci/run installs it\n`);
    ctx.skip(env.skip);
    return undefined;
  };
}

/** How a Python run ended: its exit code and what it printed. */
export interface PythonRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `python args` with `env` added to this process's; never throws, so a test can assert the exit code. */
export async function runPython(
  python: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 120_000,
): Promise<PythonRun> {
  return run(python, args, { env: { ...process.env, ...env }, timeout: timeoutMs }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === "number" ? err.code : -1,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? String(err),
    }),
  );
}

/** What `python args` printed; a run that fails throws with its exit code and stderr (the traceback). */
export async function pythonPrints(python: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const result = await runPython(python, args, env);
  if (result.code !== 0) throw new Error(`python exited ${result.code}:\n${result.stderr}`);
  return result.stdout;
}
