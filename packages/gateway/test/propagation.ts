/**
 * Waits until `ms` after `since`: a change made at `since` must show on every
 * replica by then. Asserting at the deadline (not polling before it) keeps
 * the test about the gateway, not about how fast a loaded test machine polls.
 */
export async function oneSecondAfter(since: number, ms = 1_000): Promise<void> {
  const wait = since + ms - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
