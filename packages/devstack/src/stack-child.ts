import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from "node:child_process";

/** util-linux's `setpriv`, which can set Linux's parent-death signal before it runs a program. */
const setpriv =
  process.platform === "linux" &&
  spawnSync("setpriv", ["--pdeathsig", "TERM", "--", "true"], { stdio: "ignore" }).status === 0;

/**
 * Spawns a process of the stack, tied to this one, so that no way this
 * process ends leaves it running (docs/adr/0012-pnpm-start-stops-as-one.md):
 * - it runs in its own process group, so a terminal's Ctrl-C reaches only
 *   `pnpm start`, which then stops the stack in order (gateway first, stores
 *   last) instead of every process at once;
 * - on Linux it gets SIGTERM when this process dies, however it dies, even by
 *   SIGKILL (the parent-death signal, set by `setpriv --pdeathsig` right
 *   before the program runs). Node children also stop when their IPC channel
 *   closes (`onShutdown` in core), which covers the other systems.
 *
 * A program that cannot be found makes `setpriv` exit with code 127.
 */
export function spawnStackChild(
  command: string,
  args: readonly string[],
  options: SpawnOptions,
): ChildProcess {
  return setpriv
    ? spawn("setpriv", ["--pdeathsig", "TERM", "--", command, ...args], { ...options, detached: true })
    : spawn(command, args, { ...options, detached: true });
}
