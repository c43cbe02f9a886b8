/** What the kernel's process table (`/proc`) says of a pid. */
import { readdirSync, readFileSync } from "node:fs";

/**
 * When a running process started (in clock ticks since boot, field 22 of `/proc/PID/stat`), or
 * undefined when no process has that pid or it is a zombie waiting to be reaped.
 */
export function startedAt(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[0] === "Z" ? undefined : fields[19];
}

/**
 * What a running process is doing, for a message that names it: its state, the kernel function it
 * waits in, and its threads by name and state (`/proc`); undefined when it is gone.
 */
export function processState(pid: number): string | undefined {
  const stateOf = (stat: string) => stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  try {
    const threads = readdirSync(`/proc/${pid}/task`).map((tid) => {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      return `${stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))}:${stateOf(stat)}`;
    });
    const wchan = readFileSync(`/proc/${pid}/wchan`, "utf8").trim();
    return `state ${stateOf(readFileSync(`/proc/${pid}/stat`, "utf8"))}, waiting in ${wchan || "nothing"}, threads ${threads.join(" ")}`;
  } catch {
    return undefined;
  }
}

/** Whether a process still runs: it exists and is not a zombie waiting to be reaped. */
export function processRunning(pid: number): boolean {
  return startedAt(pid) !== undefined;
}

/** A process's command line, its arguments joined by spaces, or undefined once it is gone. */
export function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return undefined;
  }
}
