/**
 * `promise`, or the error `late()` makes once `ms` have passed, whichever comes first; the timer is
 * cleared either way and keeps no process alive. The promise that lost keeps running (its later
 * rejection is the race's, never an unhandled one).
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
    timer.unref();
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
