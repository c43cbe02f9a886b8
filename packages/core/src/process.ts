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
