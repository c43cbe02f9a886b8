/** How long a shutdown may take before the process ends anyway, unless the caller says otherwise. */
export const SHUTDOWN_DEADLINE_MS = 30_000;

/**
 * `WORKERS_SHUTDOWN_GRACE`'s default: the service's setting, and what `pnpm start` waits for (and
 * 5 s more) when it is not set.
 */
export const WORKERS_SHUTDOWN_GRACE_DEFAULT = "10s";

/**
 * Runs `shutdown` on SIGTERM and SIGINT, and when the process that started us
 * over IPC (`pnpm start`) goes away, so no orphan keeps a port. A shutdown that
 * has not finished within `deadlineMs` (a store it waits on is gone, say) ends
 * the process anyway, with code 1, and so does a second signal while it runs
 * (a second Ctrl-C, or the parent-death signal of a stack whose runner was
 * killed while it was stopping us): a process that hangs in its shutdown would
 * otherwise outlive everything around it.
 */
export function onShutdown(
  shutdown: (reason: string) => Promise<void> | void,
  options: { deadlineMs?: number } = {},
): void {
  let called = false;
  let signals = 0;
  const begin = (reason: string) => {
    if (called) return;
    called = true;
    setTimeout(() => process.exit(1), options.deadlineMs ?? SHUTDOWN_DEADLINE_MS).unref();
    Promise.resolve(shutdown(reason)).finally(() => process.exit(0));
  };
  const signalled = (signal: NodeJS.Signals) => {
    if (++signals > 1) process.exit(1);
    begin(signal);
  };
  process.on("SIGTERM", signalled);
  process.on("SIGINT", signalled);
  if (process.send) process.once("disconnect", () => begin("parent exited"));
}

/**
 * Tells the process that started us over IPC (devstack's `startNodeProcess`)
 * which port we listen on: with `PORT=0` it is the one the kernel gave, so a
 * test never probes for a free port that another process may take first.
 */
export function reportListening(port: number): void {
  process.send?.({ listening: port });
}
