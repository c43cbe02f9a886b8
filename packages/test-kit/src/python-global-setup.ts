/**
 * vitest `globalSetup`: makes the openai-python environment the drop-in tests
 * drive before any test file runs, once per machine (`pythonWith` keeps it in
 * the system's temporary directory). Made here, no test waits for pip inside
 * its own timeout, and test files that would ask at once do not each make one.
 * Where the machine has no Python, nothing is made and those tests skip.
 */
import { OPENAI_PYTHON, pythonWith } from "./python-venv.ts";

export default async function setup(): Promise<void> {
  const started = performance.now();
  const env = await pythonWith([OPENAI_PYTHON]);
  const ms = performance.now() - started;
  if ("skip" in env) process.stderr.write(`openai-python tests will skip: ${env.skip}\n`);
  // Found made already, it is not news.
  else if (ms >= 1_000)
    process.stderr.write(`made the ${OPENAI_PYTHON} environment in ${(ms / 1000).toFixed(1)} s\n`);
}
