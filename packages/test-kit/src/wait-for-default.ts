/**
 * Run before every test file (vitest `setupFiles`, both projects): `vi.waitFor` waits up to
 * `WAIT_FOR_TIMEOUT_MS` unless the test gives its own timeout. Vitest's own default is one second,
 * which a busy 2-core machine can spend on a fresh process's first request alone (a fresh clone's
 * CI run once failed on it): a wait for something that will happen must not hang on how fast the
 * machine is that day. A test that gives a timeout keeps it.
 */
import { vi } from "vitest";

const WAIT_FOR_TIMEOUT_MS = 10_000;

const WRAPPED = Symbol.for("gw.test-kit.waitForDefault");
type WaitFor = typeof vi.waitFor & { [WRAPPED]?: true };

// Test files share workers (`isolate: false`): wrapped once per worker, not once per file.
if (!(vi.waitFor as WaitFor)[WRAPPED]) {
  const waitFor = vi.waitFor.bind(vi);
  const withDefault = ((callback, options) =>
    waitFor(
      callback,
      typeof options === "number" ? options : { timeout: WAIT_FOR_TIMEOUT_MS, ...options },
    )) as WaitFor;
  withDefault[WRAPPED] = true;
  vi.waitFor = withDefault;
}
