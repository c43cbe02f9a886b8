import { describe, expect, it } from "vitest";
import { atLeastChars, inTurn, turnsTaken } from "../src/turns.ts";

describe("inTurn", () => {
  it("runs one piece per turn of the event loop, in the order asked", async () => {
    // A probe that runs once every turn: how many turns had passed when each piece ran.
    let turn = 0;
    let probing = true;
    const probe = () => {
      turn++;
      if (probing) setImmediate(probe);
    };
    setImmediate(probe);
    const ran: [number, number][] = [];
    const before = turnsTaken();
    const results = await Promise.all(
      [0, 1, 2, 3, 4].map((n) =>
        inTurn(() => {
          ran.push([n, turn]);
          return n * 10;
        }),
      ),
    );
    probing = false;
    expect(results).toEqual([0, 10, 20, 30, 40]);
    expect(ran.map(([n]) => n)).toEqual([0, 1, 2, 3, 4]);
    // Between two pieces the loop turned: never two pieces in one turn (one after another, they would share one).
    for (let i = 1; i < ran.length; i++) expect(ran[i]![1]).toBeGreaterThan(ran[i - 1]![1]);
    expect(turnsTaken() - before).toBe(5);
  });

  it("rejects with the piece's error, and the pieces after it still run", async () => {
    const failing = inTurn(() => {
      throw new SyntaxError("not JSON");
    });
    const next = inTurn(() => "ran");
    await expect(failing).rejects.toThrow("not JSON");
    await expect(next).resolves.toBe("ran");
  });
});

describe("atLeastChars", () => {
  it("tells a value's JSON size apart from a bound without serialising it", () => {
    const big = { messages: [{ role: "user", content: "x".repeat(70_000) }] };
    expect(atLeastChars(big, 64 * 1024)).toBe(true);
    expect(atLeastChars({ messages: [{ role: "user", content: "hello" }] }, 64 * 1024)).toBe(false);
    // Many small values count too, not only long strings.
    expect(atLeastChars({ list: Array.from({ length: 70_000 }, () => 0) }, 64 * 1024)).toBe(true);
    // Never more than the JSON's own length: a value under the bound is never taken for a large one.
    for (const value of [{ a: "b" }, [1, 2, 3], "text", null, { nested: { deeper: ["x", "y"] } }]) {
      const length = JSON.stringify(value).length;
      expect(atLeastChars(value, length + 1)).toBe(false);
    }
  });
});
