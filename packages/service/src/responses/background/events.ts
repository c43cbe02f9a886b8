import type { RedisClient } from "@gw/core/redis";

/**
 * A background response's stream events, kept in a Redis stream
 * (`gw:bg:{<response id>}:events`) for `ttlMs` after the last one and at
 * most `maxEvents` of them, so a client may stream the response while it
 * runs and resume it later (`GET /responses/{id}?stream=true&starting_after=N`).
 * Entry `0-<n + 1>` holds the event whose `sequence_number` is n, as its
 * server-sent-event text; an entry with `end` after the last event says no
 * more will come.
 */
export class ResponseEvents {
  private readonly redis: RedisClient;
  private readonly options: { ttlMs: number; maxEvents: number };

  constructor(redis: RedisClient, options: { ttlMs: number; maxEvents: number }) {
    this.redis = redis;
    this.options = options;
  }

  /** Appends one event (its `sequence_number` is `sequence`). */
  async append(responseId: string, sequence: number, text: string): Promise<void> {
    const key = eventsKey(responseId);
    await this.redis
      .multi()
      .xadd(key, "MAXLEN", "~", this.options.maxEvents, entryId(sequence), "e", text)
      .pexpire(key, this.options.ttlMs)
      .exec();
  }

  /**
   * The events of a response just queued, as OpenAI's background streams
   * begin: `response.created` (status `queued`) and `response.queued`
   * (`QUEUED_EVENTS` of them; the worker's come after).
   */
  async queued(response: { id: string }): Promise<void> {
    const key = eventsKey(response.id);
    await this.redis
      .multi()
      .xadd(key, entryId(0), "e", sseEvent("response.created", 0, { response }))
      .xadd(key, entryId(1), "e", sseEvent("response.queued", 1, { response }))
      .pexpire(key, this.options.ttlMs)
      .exec();
  }

  /** Marks the end of the events: readers stop there. `last`: the last event's sequence number (-1: none). */
  async end(responseId: string, last: number): Promise<void> {
    const key = eventsKey(responseId);
    await this.redis
      .multi()
      .xadd(key, "MAXLEN", "~", this.options.maxEvents, entryId(last + 1), "end", "1")
      .pexpire(key, this.options.ttlMs)
      .exec();
  }

  /** The sequence number of the last event kept (-1: none), and whether the events have ended; undefined: nothing kept. */
  async last(responseId: string): Promise<{ sequence: number; ended: boolean } | undefined> {
    const [entry] = await this.redis.xrevrange(eventsKey(responseId), "+", "-", "COUNT", 1);
    if (!entry) return undefined;
    const n = sequenceOf(entry[0]);
    return entry[1][0] === "end" ? { sequence: n - 1, ended: true } : { sequence: n, ended: false };
  }

  /**
   * The events after `after` (-1: from the first), as they are kept and then
   * as they come, until the end entry or `signal`. What is kept is read on
   * the shared connection; only a reader that must wait for more asks
   * `blocking` for a connection of its own (it waits on Redis with `XREAD BLOCK`).
   */
  async *read(
    responseId: string,
    after: number,
    signal: AbortSignal,
    blocking: () => RedisClient,
  ): AsyncGenerator<string> {
    const key = eventsKey(responseId);
    let cursor = after < 0 ? "0-0" : entryId(after);
    const kept = await this.redis.xrange(key, `(${cursor}`, "+");
    for (const [id, fields] of kept) {
      if (fields[0] === "end") return;
      cursor = id;
      yield fields[1]!;
    }
    // Nothing after `after`: a stream that has ended (asked past its last event) has nothing more to send.
    if (kept.length === 0) {
      const [last] = await this.redis.xrevrange(key, "+", "-", "COUNT", 1);
      if (last?.[1][0] === "end") return;
    }
    const reader = blocking();
    let quiet = 0;
    while (!signal.aborted) {
      const reply = (await reader.xread("COUNT", 500, "BLOCK", 1_000, "STREAMS", key, cursor)) as
        | [string, [string, string[]][]][]
        | null;
      // Nothing for a while (a long call): a comment line, which clients skip, keeps proxies from ending the stream.
      quiet = reply ? 0 : quiet + 1;
      if (quiet > 0 && quiet % KEEP_ALIVE_SECONDS === 0) yield KEEP_ALIVE;
      for (const [id, fields] of reply?.[0]?.[1] ?? []) {
        if (fields[0] === "end") return;
        cursor = id;
        yield fields[1]!;
      }
    }
  }
}

/** Events a background response's stream starts with before a worker takes it (`ResponseEvents.queued`). */
export const QUEUED_EVENTS = 2;

/** One event as a stream has it, numbered `sequence`. */
export const sseEvent = (type: string, sequence: number, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...data })}\n\n`;

/** Seconds without an event after which a reader is sent `KEEP_ALIVE` (the gateway ends a silent answer after SERVICE_IDLE_TIMEOUT_MS). */
const KEEP_ALIVE_SECONDS = 15;
/** An event-stream comment: clients skip it. */
export const KEEP_ALIVE = ": keep-alive\n\n";

const eventsKey = (responseId: string) => `gw:bg:{${responseId}}:events`;
const entryId = (sequence: number) => `0-${sequence + 1}`;
const sequenceOf = (id: string) => Number(id.slice(2)) - 1;
