import type { Clock } from "@gw/core/clock";
import { randomHex } from "@gw/core/random";

/**
 * 32 hex digits: the time of issue in milliseconds (48 bits, 12 digits, as
 * UUIDv7 keeps it) then 80 random bits. The time lets the orphan reconciler
 * leave alone what is still being created (`issuedAt`).
 */
const stampedHex = (at: number) => `${at.toString(16).padStart(12, "0").slice(-12)}${randomHex(20)}`;

/** An id the service issues at `at` (ms since the epoch): `<prefix>_` and 32 hex digits (`conv_…`, `resp_…`, `msg_…`, `call_…`). */
export const newId = (prefix: string, at: number) => `${prefix}_${stampedHex(at)}`;

/** A chat completion's id issued at `at`, as OpenAI spells them: `chatcmpl-` and 32 hex digits. */
export const newCompletionId = (at: number) => `chatcmpl-${stampedHex(at)}`;

/** Issues the service's ids, stamped with the wall time of the process's clock (the reconciler's too). */
export interface Ids {
  /** `<prefix>_` and 32 hex digits, stamped now. */
  newId(prefix: string): string;
  /** `chatcmpl-` and 32 hex digits, stamped now. */
  newCompletionId(): string;
}

/** The ids of a process whose clock is `clock`. */
export const ids = (clock: Pick<Clock, "wall">): Ids => ({
  newId: (prefix) => newId(prefix, clock.wall()),
  newCompletionId: () => newCompletionId(clock.wall()),
});

/** Ids issued before this carried no time (2026-01-01): their first digits are random. */
const STAMPED_SINCE = Date.UTC(2026, 0, 1);

/**
 * When the service issued `id` (ms since the epoch), read from its digits;
 * `undefined` for an id that carries no plausible time (not one of ours, or
 * issued before ids were stamped): its age is unknown.
 */
export function issuedAt(id: string, now: number): number | undefined {
  const match = /^(?:[a-z]+_|chatcmpl-)([0-9a-f]{12})[0-9a-f]{20}$/.exec(id);
  if (!match) return undefined;
  const at = Number.parseInt(match[1]!, 16);
  return at >= STAMPED_SINCE && at <= now + 60_000 ? at : undefined;
}
