/**
 * Run before every test file (vitest `setupFiles`). Test files share worker processes (`isolate: false`),
 * so what one file leaves in its process, the next one inherits. This fails the file that leaves behind
 * the process-wide state known to change another file's outcome, and puts that state back:
 * - fake timers (a frozen `Date` stops every expiry in the next file);
 * - environment variables set or removed;
 * - tracing turned on (`startTracing`) and not stopped.
 * It also fails the file that loads the SpiceDB engine's library into the worker: that cannot be put
 * back (its Go runtime stays for every later file), so such a file belongs in the project whose files
 * each get a fresh process (`ENGINE_FILES` in vitest.config.ts); others use `startTestSpiceDB`.
 */
import { readFileSync } from "node:fs";
import { stopTracing, tracingEnabled } from "@gw/core/tracing";
import { afterAll, beforeAll, vi } from "vitest";

let env: Record<string, string | undefined> = {};
let engineLoaded = false;

/** Whether the SpiceDB engine's library is mapped into this process. */
function engineInProcess(): boolean {
  return process.platform === "linux" && readFileSync("/proc/self/maps", "utf8").includes("libspicedb");
}

beforeAll(() => {
  env = { ...process.env };
  engineLoaded = engineInProcess();
});

afterAll(async () => {
  const left: string[] = [];
  if (vi.isFakeTimers()) {
    vi.useRealTimers();
    left.push("fake timers on");
  }
  const changed = [...new Set([...Object.keys(env), ...Object.keys(process.env)])].filter(
    (name) => process.env[name] !== env[name],
  );
  for (const name of changed) {
    if (env[name] === undefined) delete process.env[name];
    else process.env[name] = env[name];
  }
  if (changed.length > 0) left.push(`environment variables changed: ${changed.sort().join(", ")}`);
  if (tracingEnabled()) {
    await stopTracing();
    left.push("tracing on (call stopTracing in afterAll)");
  }
  if (!engineLoaded && engineInProcess()) {
    left.push("the SpiceDB engine loaded (use startTestSpiceDB, or list the file in ENGINE_FILES)");
  }
  if (left.length > 0) {
    throw new Error(`this file left its worker process changed for the next file: ${left.join("; ")}`);
  }
});
