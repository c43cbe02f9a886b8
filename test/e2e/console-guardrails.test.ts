import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleStack, newContext, signIn, startConsoleStack, watch } from "./console-browser.ts";

const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000 });

/** The console's Guardrails page and the blocks on its usage page, in Debian's Chromium against `pnpm start`. */
describe("admin console: guardrails", () => {
  let s: ConsoleStack;
  beforeAll(async () => {
    s = await startConsoleStack("gw-console-gr-");
  }, 180_000);
  afterAll(async () => {
    await s?.close();
  });

  it("creates a guardrail, tries a text, attaches it to the organization, and the usage page counts the call it blocks", async () => {
    const context = await newContext(s.browser, { width: 1280, height: 800 });
    const page = await context.newPage();
    const seen = watch(page);
    page.setDefaultTimeout(20_000);
    await signIn(page, s.url, s.root.key);

    await page.goto(`${s.url}/admin/guardrails`);
    await poll(() => page.getByRole("table", { name: "The guardrails this key may read" }).isVisible()).toBe(
      true,
    );
    await page.getByRole("button", { name: "New guardrail" }).click();
    await page.getByLabel("Name (shown to callers it blocks)").fill("house rules");
    await page.getByLabel("Checks (JSON)").fill('[{"type": "ban_words", "words": ["zorblax"]}]');
    await page.getByRole("button", { name: "Create guardrail" }).click();
    const row = page.getByRole("row").filter({ hasText: "house rules" });
    await poll(() => row.textContent()).toContain("ban_words");

    // Try a text: the check that found something is named, never the text.
    await page.getByRole("button", { name: "Attachments of house rules and try a text" }).click();
    await page.getByLabel("Try a text (checked, never stored)").fill("please say Zorblax");
    await page.getByRole("button", { name: "Try", exact: true }).click();
    const found = page.getByRole("table", { name: "What house rules finds in the text" });
    await poll(() => found.textContent()).toContain("ban_words");
    expect(await found.textContent()).not.toMatch(/zorblax/i);
    await page.getByLabel("Try a text (checked, never stored)").fill("an ordinary sentence");
    await page.getByRole("button", { name: "Try", exact: true }).click();
    await poll(() => found.textContent()).toContain("the text passes");

    // Attached to the organization, it blocks a call that says the word.
    await page.getByLabel(/^Attached to/).fill("organization");
    await page.getByRole("button", { name: "Save attachments" }).click();
    await poll(() => page.getByText("Attachments saved.").isVisible()).toBe(true);
    const blocked = await fetch(`${s.url}/api/v1/llm/responses`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo-small", input: "tell me about zorblax" }),
    });
    expect(blocked.status).toBe(400);
    expect((await blocked.json()).error.code).toBe("guardrail_blocked");

    await page.goto(`${s.url}/admin/usage`);
    const blocks = page.getByRole("table", { name: /^Blocks per guardrail/ });
    const blockRow = blocks.getByRole("row").filter({ hasText: "house rules" });
    await poll(() => blockRow.getByRole("cell").nth(1).textContent()).toBe("1");

    expect(seen.errors).toEqual([]);
    expect(seen.dialogs).toEqual([]);
    await context.close();
  }, 120_000);
});
