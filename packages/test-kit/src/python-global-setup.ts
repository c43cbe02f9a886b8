/**
 * vitest `globalSetup`: starts making the openai-python environment the
 * drop-in tests drive, once per machine (`pythonWith` keeps it in the
 * system's temporary directory), without holding up the run: test files
 * start meanwhile, and one that needs it waits for it (`pythonWith`'s lock),
 * so pip's install (seconds on a fresh machine) overlaps the files that do
 * not, and no file makes one of its own. Where the machine has no Python,
 * nothing is made and those tests skip.
 */
import { OPENAI_PYTHON, pythonWith } from "./python-venv.ts";

export default function setup(): () => Promise<void> {
  const started = performance.now();
  const made = pythonWith([OPENAI_PYTHON]).then(
    (env) => {
      const ms = performance.now() - started;
      if ("skip" in env) process.stderr.write(`openai-python tests will skip: ${env.skip}\n`);
      // Found made already, it is not news.
      else if (ms >= 1_000)
        process.stderr.write(`made the ${OPENAI_PYTHON} environment in ${(ms / 1000).toFixed(1)} s\n`);
    },
    // The files that need it try again, and fail saying why.
    (err: Error) => process.stderr.write(`could not make the ${OPENAI_PYTHON} environment: ${err.message}\n`),
  );
  // The run ends only once it is made (or has failed), never with pip cut off half-way.
  return async () => {
    await made;
  };
}
