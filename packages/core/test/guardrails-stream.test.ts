import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { checksSchema, evaluate, holdbackFor, type Policy, StreamHoldback } from "../src/guardrails/index.ts";

const policy: Policy = {
  id: `gr_${randomBytes(16).toString("hex")}`,
  version: 1,
  checks: checksSchema.parse([{ type: "ban_words", words: ["forbidden", "top secret plan"] }]),
  applies_to: "output",
  action: "block",
};

/**
 * Feeds `chunks` the way the pipeline does: after each, evaluate what was
 * received as a partial text and release what the hold-back allows; at the
 * end, evaluate the whole. Returns what reached the client and whether it was blocked.
 */
function stream(chunks: string[], window = holdbackFor([policy])): { sent: string; blocked: boolean } {
  const hold = new StreamHoldback(window);
  let sent = "";
  for (const chunk of chunks) {
    hold.push(chunk);
    if (evaluate([policy], hold.text, { direction: "output", partial: true }).decisions.length > 0)
      return { sent, blocked: true };
    sent += hold.release();
  }
  if (evaluate([policy], hold.text, { direction: "output" }).decisions.length > 0)
    return { sent, blocked: true };
  return { sent: sent + hold.release(true), blocked: false };
}

describe("StreamHoldback", () => {
  it("catches a banned word split across chunks before any part of it is released", () => {
    const r = stream([
      "Some long harmless preamble that goes on for a while, ".repeat(3),
      "then the for",
      "bid",
      "den word",
      " and more",
    ]);
    expect(r.blocked).toBe(true);
    expect(r.sent).toContain("preamble");
    expect(r.sent).not.toMatch(/then the f/);
  });

  it("catches a phrase split across chunks, with zero-width characters padding it", () => {
    const pad = "\u200B".repeat(500);
    const r = stream(["x".repeat(300), " top", pad, " sec", pad, "ret", pad, " plan", " done"]);
    expect(r.blocked).toBe(true);
    expect(r.sent).not.toContain("top");
    // Without the window, the phrase's first words would have gone out before its last arrived.
    expect(
      stream(["x".repeat(300), " top", pad, " sec", pad, "ret", pad, " plan", " done"], 0).sent,
    ).toContain("top");
  });

  it("does not block a word that only starts like a banned one, and sends everything in the end", () => {
    const text = "this is forbiddenness, which is fine";
    const chunks = text.match(/.{1,3}/g)!;
    expect(stream(chunks)).toEqual({ sent: text, blocked: false });
  });

  it("releases only what lies before the window and the word in progress", () => {
    const hold = new StreamHoldback(10);
    hold.push("abc def");
    expect(hold.releasable()).toBe(0);
    hold.push(" ghi jklmnopq rst");
    // 24 characters: the last 10 held, and "jklmnopq" straddles the cut, so it is held whole.
    expect(hold.release()).toBe("abc def ghi ");
    hold.push("u");
    expect(hold.release()).toBe("");
    expect(hold.release(true)).toBe("jklmnopq rstu");
    expect(hold.releasedLength).toBe(hold.text.length);
  });

  it("never splits a surrogate pair", () => {
    const hold = new StreamHoldback(1);
    hold.push("a 😀😀 b");
    const released = hold.release();
    expect(released.isWellFormed()).toBe(true);
  });

  it("sizes its window from the longest banned phrase", () => {
    const long = "a".repeat(150);
    const p = { ...policy, version: 9, checks: checksSchema.parse([{ type: "ban_words", words: [long] }]) };
    expect(holdbackFor([p])).toBe(150);
    expect(holdbackFor([policy])).toBe(64);
  });
});
