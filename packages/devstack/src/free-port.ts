import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The lowest port handed out. */
const LOWEST = 10_000;

/**
 * The first port of the kernel's ephemeral range (Linux: `ip_local_port_range`; 32768 elsewhere or
 * when unreadable). The kernel picks the source port of every outgoing connection, and the port of every
 * `listen(0)`, from that range on its own.
 */
export function ephemeralRangeStart(): number {
  try {
    const first = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0],
    );
    return Number.isInteger(first) && first > LOWEST ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether a server can listen on `port` of 127.0.0.1 right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * How long a port handed out stays reserved against other processes: time enough for whoever was given
 * it to bind it, however loaded the machine.
 */
const RESERVED_MS = 120_000;

/**
 * Reserves `port` against every other process on the machine that draws through `freePort` (another
 * suite's worker of the same number draws from the same slice): a Unix socket in Linux's abstract
 * namespace, named by the port, bound for `RESERVED_MS`. The kernel lets one process at a time bind a
 * name, and frees it when the process exits, so nothing is left behind. False when another process holds
 * it; true where abstract sockets do not exist (not Linux), with no reservation.
 */
function reserve(port: number): Promise<boolean> {
  if (process.platform !== "linux") return Promise.resolve(true);
  return new Promise((resolve) => {
    const holder = createServer();
    holder.unref();
    holder.once("error", () => resolve(false));
    holder.listen(`\0gw-free-port-${port}`, () => {
      setTimeout(() => holder.close(), RESERVED_MS).unref();
      resolve(true);
    });
  });
}

/** Slices of the range, one per vitest worker (`VITEST_POOL_ID`, 1 to 8): workers never draw the same port. */
const SLICES = 8;

/** Ports this process handed out, none of which it hands out again while its slice has others. */
const handedOut = new Set<number>();

/** The ports to draw from: the whole range, or, in a vitest worker, the worker's slice of it. */
function drawRange(): { lowest: number; highest: number } {
  const highest = ephemeralRangeStart() - 1;
  const worker = Number(process.env.VITEST_POOL_ID);
  if (!Number.isInteger(worker) || worker < 1) return { lowest: LOWEST, highest };
  const size = Math.floor((highest - LOWEST + 1) / SLICES);
  const lowest = LOWEST + ((worker - 1) % SLICES) * size;
  return { lowest, highest: lowest + size - 1 };
}

/**
 * A TCP port that was free a moment ago on 127.0.0.1, for a process to be told to listen on. It is drawn
 * at random below the kernel's ephemeral range, so that between now and that process's `listen` the
 * kernel does not hand it to an outgoing connection or another `listen(0)` (with many tests starting
 * servers at once, a port the kernel had picked was sometimes taken again before the stack that was
 * given it could bind it). Nor is it a port handed out before by this process, or, in a vitest worker,
 * by another worker (each draws from its own slice), or by another process that draws through here (a
 * second suite run at once on the machine, whose workers draw from the same slices: `reserve`): a port
 * handed out is free until its process binds it, and a second draw of it in that time gave it twice.
 */
export async function freePort(): Promise<number> {
  const { lowest, highest } = drawRange();
  if (handedOut.size > (highest - lowest + 1) / 2) handedOut.clear();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = randomInt(lowest, highest + 1);
    if (handedOut.has(port) || !(await canListen(port)) || !(await reserve(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found between ${lowest} and ${highest}`);
}
