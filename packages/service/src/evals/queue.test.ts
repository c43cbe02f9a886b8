import type { Socket } from "node:net";
import { useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { bullConnection } from "./queue.ts";

describe("BullMQ's Redis connections", () => {
  const test = useTestRedis();

  it.each(["producer", "worker"] as const)(
    "write each command as it is called (the %s's: no auto-pipelining)",
    async (role) => {
      const connection = bullConnection(test.server.url, role);
      try {
        await connection.ping();
        const socket = (connection as unknown as { stream: Socket }).stream;
        const before = socket.bytesWritten;
        const read = connection.get("gw:test:bull");
        expect(socket.bytesWritten).toBeGreaterThan(before);
        await read;
      } finally {
        connection.disconnect();
      }
    },
  );
});
