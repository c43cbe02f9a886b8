import { describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

const logLines: string[] = [];
const stack = useStack({}, {}, logLines);

const entries = () => logLines.map((line) => JSON.parse(line) as Record<string, unknown>);

describe("a client that goes away before its answer", () => {
  it.each([false, true])(
    "stream %s: logged at info as a client that closed the request, never as an unhandled error",
    async (stream) => {
      const key = await stack.createKey();
      const asked = stack.llm.requests.length;
      stack.llm.mode = stream ? "hold-midstream" : "hold";
      const abort = new AbortController();
      const pending = fetch(`${stack.gatewayUrl}/api/v1/llm/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ input: "never mind", stream }),
        signal: abort.signal,
      }).then(async (res) => {
        await res.text();
      });
      pending.catch(() => undefined);
      // Waits as long as a loaded machine may take (vitest's default is 1 s).
      await vi.waitFor(() => expect(stack.llm.requests.length).toBe(asked + 1), { timeout: 15_000 });
      const from = logLines.length;
      abort.abort();
      await expect(pending).rejects.toThrow();
      // Both processes say so, at info: the service (its logger is named "service") and the gateway.
      await vi.waitFor(
        () => {
          const closed = entries()
            .slice(from)
            .filter((e) => e.level === 30 && e.msg === "client closed the request");
          expect(closed).toContainEqual(expect.objectContaining({ name: "service" }));
          expect(closed).toContainEqual(expect.objectContaining({ name: "test" }));
        },
        { timeout: 15_000 },
      );
      stack.llm.release();
      const after = entries().slice(from);
      expect(after.filter((e) => e.msg === "unhandled error")).toEqual([]);
      expect(after.filter((e) => Number(e.level) >= 50)).toEqual([]);
    },
  );
});
