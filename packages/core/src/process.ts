/**
 * Runs `shutdown` on SIGTERM and SIGINT, and when the process that started us
 * over IPC (`pnpm start`) goes away, so no orphan keeps a port.
 */
export function onShutdown(shutdown: (reason: string) => Promise<void> | void): void {
  let called = false;
  const once = (reason: string) => {
    if (called) return;
    called = true;
    Promise.resolve(shutdown(reason)).finally(() => process.exit(0));
  };
  process.once("SIGTERM", () => once("SIGTERM"));
  process.once("SIGINT", () => once("SIGINT"));
  if (process.send) process.once("disconnect", () => once("parent exited"));
}

/**
 * Tells the process that started us over IPC (devstack's `startNodeProcess`)
 * which port we listen on: with `PORT=0` it is the one the kernel gave, so a
 * test never probes for a free port that another process may take first.
 */
export function reportListening(port: number): void {
  process.send?.({ listening: port });
}
