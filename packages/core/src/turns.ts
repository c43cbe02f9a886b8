/**
 * Work that grows with a request's body and cannot be cut into pieces
 * (parsing a large JSON body, serialising a large request for a provider)
 * takes turns: one piece per turn of the event loop, process-wide, in the
 * order asked. Between two pieces the loop polls, so every other request's
 * ready work (a small request's next step) waits behind one piece at most,
 * not behind one piece of every large request in flight. Twenty 1 MiB bodies
 * arriving at once cost the same CPU; they no longer cost it in one stretch
 * that a small request of another tenant sits behind.
 */

/** Work on at least this many characters (a body's bytes, a value's JSON) takes a turn of its own. */
export const LARGE_WORK_CHARS = 64 * 1024;

const waiting: (() => void)[] = [];
let scheduled = false;
let taken = 0;

/** Runs `work` in a turn of its own, after the pieces asked before it; its result or its error. */
export function inTurn<T>(work: () => T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    waiting.push(() => {
      try {
        resolve(work());
      } catch (err) {
        reject(err);
      }
    });
    if (!scheduled) {
      scheduled = true;
      setImmediate(runNext);
    }
  });
}

function runNext(): void {
  const next = waiting.shift();
  taken++;
  next?.();
  if (waiting.length > 0) setImmediate(runNext);
  else scheduled = false;
}

/** Pieces run in turns since the process started (for tests, and to tell the path a body took). */
export const turnsTaken = (): number => taken;

/**
 * Whether `value` would take at least `chars` characters as JSON, told
 * without serialising it: its strings' lengths and one for every other
 * value, stopping as soon as `chars` is reached (so it costs little even
 * for a large value).
 */
export function atLeastChars(value: unknown, chars: number): boolean {
  let left = chars;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const next = stack.pop();
    if (typeof next === "string") left -= next.length + 2;
    else if (Array.isArray(next)) {
      left -= 1 + next.length;
      for (const item of next) stack.push(item);
    } else if (next !== null && typeof next === "object") {
      for (const [key, item] of Object.entries(next)) {
        left -= key.length + 3;
        stack.push(item);
      }
    } else left -= 1;
    if (left <= 0) return true;
  }
  return false;
}

/** `JSON.stringify(value)`, in a turn of its own when the value is large (`LARGE_WORK_CHARS`). */
export async function stringified(value: unknown): Promise<string> {
  return atLeastChars(value, LARGE_WORK_CHARS) ? inTurn(() => JSON.stringify(value)) : JSON.stringify(value);
}
