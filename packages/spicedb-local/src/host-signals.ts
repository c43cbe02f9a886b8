import { libc } from "./libc.ts";

/**
 * The asynchronous signals Node (libuv) handles when asked (`process.on("SIGTERM", …)`): SIGHUP, SIGINT,
 * SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGWINCH (Linux numbers). Not SIGCHLD: Node 24 waits for
 * its children through pidfds and leaves SIGCHLD at its default, and Go unblocks it on its threads.
 */
export const HOST_SIGNALS = [1, 2, 3, 10, 12, 14, 15, 28] as const;

/** `sigset_t` as glibc lays it out: 1,024 bits, signal n at bit n - 1, little-endian words. */
const SIGSET_BYTES = 128;
const SIG_BLOCK = 0;
const SIG_SETMASK = 2;

type SigmaskFn = (how: number, set: Buffer | null, old: Buffer | null) => number;
let sigmask: SigmaskFn | undefined;

function pthreadSigmask(): SigmaskFn {
  sigmask ??= libc().func(
    "int pthread_sigmask(int how, const uint8_t *set, _Out_ uint8_t *oldset)",
  ) as SigmaskFn;
  return sigmask;
}

/** The set of `signals`, as `sigset_t`. */
export function sigset(signals: readonly number[]): Buffer {
  const set = Buffer.alloc(SIGSET_BYTES);
  for (const signal of signals) set[(signal - 1) >> 3]! |= 1 << ((signal - 1) & 7);
  return set;
}

/**
 * Runs `load` (the first load of the SpiceDB library) with Node's signals blocked on this thread, then
 * unblocks them. The library is Go: its runtime starts its threads from this one and every thread it
 * makes later keeps that mask, so those signals are never delivered to a thread running Go code. There,
 * a handler libuv installs after the library has loaded (without SA_ONSTACK, which Go requires of every
 * foreign handler; Go adds it only to the handlers present when it starts) would run on a goroutine's
 * stack and could corrupt it. Node's own threads still take the signals. Linux only (elsewhere `load`
 * just runs).
 */
export function withHostSignalsBlocked<T>(load: () => T): T {
  if (process.platform !== "linux") return load();
  const mask = pthreadSigmask();
  const old = Buffer.alloc(SIGSET_BYTES);
  if (mask(SIG_BLOCK, sigset(HOST_SIGNALS), old) !== 0) throw new Error("pthread_sigmask failed");
  try {
    return load();
  } finally {
    mask(SIG_SETMASK, old, null);
  }
}
