import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { processRunning } from "./process-table.ts";

/** How often a process that waits for another's making looks again. */
const POLL_MS = 100;

/**
 * What `ready` finds, made by `make` when it finds nothing, by one process at a
 * time across the machine: the maker holds the directory `lock` (with its pid in
 * it) while it makes; the others wait, then take what it made. A lock whose
 * maker is gone, or that is older than `timeoutMs` (the most a making may take),
 * is taken over. For what a fresh machine's first processes would otherwise
 * each make at once (the vector database's template, the tests' Python
 * environment). `make` puts its result in place whole (made under another name
 * and renamed), so `ready` never finds part of one.
 */
export async function madeOnce<T>(
  lock: string,
  ready: () => Promise<T | undefined>,
  make: () => Promise<T>,
  timeoutMs: number,
): Promise<T> {
  for (;;) {
    const found = await ready();
    if (found !== undefined) return found;
    if (await takeLock(lock)) {
      try {
        await writeFile(join(lock, "pid"), String(process.pid));
        return (await ready()) ?? (await make());
      } finally {
        await rm(lock, { recursive: true, force: true });
      }
    }
    if (await abandoned(lock, timeoutMs)) await rm(lock, { recursive: true, force: true });
    else await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Makes the directory `lock` (and its parents): false when it is there already (another process holds it). */
async function takeLock(lock: string): Promise<boolean> {
  await mkdir(dirname(lock), { recursive: true });
  return mkdir(lock).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === "EEXIST") return false;
      throw err;
    },
  );
}

/** Whether `lock`'s maker is gone, or it is older than a making may take (gone itself: not abandoned, looked at again). */
async function abandoned(lock: string, timeoutMs: number): Promise<boolean> {
  const made = (await stat(lock).catch(() => undefined))?.mtimeMs;
  if (made === undefined) return false;
  const maker = Number(await readFile(join(lock, "pid"), "utf8").catch(() => "0"));
  return (maker > 0 && !processRunning(maker)) || Date.now() - made > timeoutMs;
}
