import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import { useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { UsageStore } from "./store.ts";

describe("a usage record sent without waiting (recordSoon)", () => {
  const test = useTestRedis();

  it("is on Redis's connection when the call returns, while other commands leave at the end of the turn", async () => {
    const usage = new UsageStore(test.redis);
    const org = `org-${randomBytes(4).toString("hex")}`;
    await test.redis.ping();
    const socket = (test.redis as unknown as { stream: Socket }).stream;
    const before = socket.bytesWritten;
    // Every client batches what one turn sends (ioredis's auto-pipelining): a GET is not written yet.
    const read = test.redis.get(`gw:test:${org}`);
    expect(socket.bytesWritten).toBe(before);
    // A caller answers its own client right after this: the record must already be on the wire.
    usage.recordSoon({
      org,
      keyId: "key_1",
      user: "alice",
      model: "gpt",
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
    });
    expect(socket.bytesWritten).toBeGreaterThan(before);
    await Promise.all([read, usage.drain()]);
    const day = usage.today();
    expect((await usage.query(org, day, day, "model")).totals.requests).toBe(1);
  });
});
