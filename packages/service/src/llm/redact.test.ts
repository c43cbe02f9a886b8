import { describe, expect, it } from "vitest";
import { redactProviderText } from "./errors.ts";

describe("provider text for the log", () => {
  it.each([
    ["connect to redis://default:hunter22@cache:6379 failed", "redis://[redacted]@cache:6379", "hunter22"],
    ["Authorization: Bearer abc.def.ghi rejected", "Authorization: [redacted]", "abc.def.ghi"],
    ["a Bearer abc.def.ghi header", "a Bearer [redacted] header", "abc.def.ghi"],
    ['{"api_key": "k-123456", "model": "gpt-4o"}', '"api_key": "[redacted]"', "k-123456"],
    ["password=swordfish&user=bob", "password=[redacted]&user=bob", "swordfish"],
    ["invalid key sk-proj-abcdEFGH1234", "invalid key [redacted]", "abcdEFGH1234"],
    [`token ${"Qm9i".repeat(12)}== expired`, "[redacted] expired", "Qm9i"],
    ["upstream key the-configured-key was refused", "upstream key [redacted] was refused", "configured"],
  ])("%s → …%s…", (text, kept, gone) => {
    const out = redactProviderText(text, ["the-configured-key"]);
    expect(out).toContain(kept);
    expect(out).not.toContain(gone);
  });

  it("keeps what helps find the cause, and cuts long text to 512 characters", () => {
    expect(redactProviderText("The model `gpt-4o-mini-2024-07-18` does not exist")).toBe(
      "The model `gpt-4o-mini-2024-07-18` does not exist",
    );
    expect(redactProviderText("x ".repeat(1000))).toHaveLength(513);
  });
});
