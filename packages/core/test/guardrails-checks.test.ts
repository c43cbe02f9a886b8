import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  type Action,
  type AppliesTo,
  type CheckInput,
  checksSchema,
  compile,
  type EvaluateContext,
  evaluate,
  GUARDRAIL_LIMITS,
  makeCanary,
  policyFieldsSchema,
  withCanary,
} from "../src/guardrails/index.ts";

// Compiled policies are cached by id and version in the process, which test files share: ids of their own.
function policy(checks: CheckInput[], action: Action = "block", applies_to: AppliesTo = "both") {
  return {
    id: `gr_${randomBytes(16).toString("hex")}`,
    version: 1,
    checks: checksSchema.parse(checks),
    applies_to,
    action,
  };
}
const input: EvaluateContext = { direction: "input" };
const output: EvaluateContext = { direction: "output" };

/** The check types that found something in `text`. */
function hits(checks: CheckInput[], text: string, context: EvaluateContext = input): string[] {
  return evaluate([policy(checks)], text, context).decisions.map((d) => d.check);
}
function redact(checks: CheckInput[], text: string, context: EvaluateContext = input): string | undefined {
  return evaluate([policy(checks, "redact")], text, context).redacted;
}

describe("ban_words", () => {
  const ban: CheckInput[] = [{ type: "ban_words", words: ["forbidden", "Project Nightingale", "naïve"] }];

  it.each([
    ["a forbidden thing", "the word"],
    ["FORBIDDEN!", "another case"],
    ["about project   nightingale.", "a phrase over any spacing"],
    ["project-nightingale", "a phrase over punctuation"],
    ["for\u200Bbid\u200Dden", "zero-width characters inside"],
    ["f\u00ADorbidden", "a soft hyphen inside"],
    ["fоrbіddеn", "Cyrillic look-alikes"],
    ["ϝorbidden".replace("ϝ", "f").replace("o", "ο"), "a Greek omicron"],
    ["ｆｏｒｂｉｄｄｅｎ", "full-width letters"],
    ["𝐟𝐨𝐫𝐛𝐢𝐝𝐝𝐞𝐧", "mathematical bold letters"],
    ["NAIVE", "without the accent"],
    ["nai\u0308ve", "with a combining diaeresis"],
  ])("finds %j (%s)", (text) => {
    expect(hits(ban, text)).toEqual(["ban_words"]);
  });

  it.each([
    ["forbiddenness", "a longer word"],
    ["unforbidden", "a word containing it"],
    ["project nightingales", "the phrase's last word longer"],
    ["project and nightingale", "the phrase's words apart"],
    ["nothing to see", "nothing"],
  ])("does not find %j (%s)", (text) => {
    expect(hits(ban, text)).toEqual([]);
  });

  it("reads digits for letters only when leetspeak is asked for", () => {
    expect(hits(ban, "f0rb1dd3n")).toEqual([]);
    expect(hits([{ type: "ban_words", words: ["forbidden"], leetspeak: true }], "f0rb1dd3n")).toEqual([
      "ban_words",
    ]);
    expect(hits([{ type: "ban_words", words: ["secret"], leetspeak: true }], "$ecret")).toEqual([
      "ban_words",
    ]);
  });

  it("matches words of unspaced scripts inside a run of them", () => {
    expect(hits([{ type: "ban_words", words: ["秘密"] }], "これは秘密です")).toEqual(["ban_words"]);
  });

  it("matches RE2 patterns against the text as sent", () => {
    const check: CheckInput[] = [{ type: "ban_words", patterns: ["\\bord-[0-9]{6}\\b", "(?i)confidential"] }];
    expect(hits(check, "see ord-123456 now")).toEqual(["ban_words"]);
    expect(hits(check, "CONFIDENTIAL")).toEqual(["ban_words"]);
    expect(hits(check, "ord-12345")).toEqual([]);
  });

  it("answers a pattern built to backtrack, on a long input, without stalling", () => {
    const check: CheckInput[] = [{ type: "ban_words", patterns: ["(a+)+$", "(x+x+)+y"] }];
    // A backtracking engine takes exponential time on each of these; RE2 reads each once.
    expect(hits(check, `${"a".repeat(50_000)}!`)).toEqual([]);
    expect(hits(check, "x".repeat(50_000))).toEqual([]);
    expect(hits(check, "a".repeat(50_000))).toEqual(["ban_words"]);
  });

  it("refuses patterns RE2 cannot run in linear time, naming why", () => {
    for (const pattern of ["(a)\\1", "(?=a)b", "(?<=a)b", "(?!a)"]) {
      const r = checksSchema.safeParse([{ type: "ban_words", patterns: [pattern] }]);
      expect(r.success, pattern).toBe(false);
      expect(r.error!.issues[0]!.message).toMatch(/^Not a pattern RE2 accepts: /);
    }
  });

  it("holds a policy to its documented limits", () => {
    const ok = (checks: unknown) => checksSchema.safeParse(checks).success;
    expect(ok([{ type: "ban_words", words: Array(GUARDRAIL_LIMITS.words).fill("w") }])).toBe(true);
    expect(ok([{ type: "ban_words", words: Array(GUARDRAIL_LIMITS.words + 1).fill("w") }])).toBe(false);
    expect(ok([{ type: "ban_words", words: ["w".repeat(GUARDRAIL_LIMITS.wordLength + 1)] }])).toBe(false);
    expect(ok([{ type: "ban_words", patterns: Array(GUARDRAIL_LIMITS.patterns + 1).fill("a") }])).toBe(false);
    expect(ok([{ type: "ban_words", patterns: ["a".repeat(GUARDRAIL_LIMITS.patternLength + 1)] }])).toBe(
      false,
    );
    expect(ok(Array(GUARDRAIL_LIMITS.checks + 1).fill({ type: "secrets" }))).toBe(false);
    expect(ok([{ type: "ban_words", words: ["!!!"] }])).toBe(false);
    expect(ok([{ type: "ban_words" }])).toBe(false);
    expect(ok([])).toBe(false);
    expect(ok([{ type: "secrets", extra: 1 }])).toBe(false);
    expect(ok([{ type: "pii", kinds: ["ssn"] }])).toBe(false);
    expect(
      policyFieldsSchema.safeParse({ checks: [{ type: "secrets" }], applies_to: "input", action: "warn" })
        .success,
    ).toBe(false);
  });
});

describe("secrets", () => {
  const s: CheckInput[] = [{ type: "secrets" }];
  const pem =
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----";
  it.each([
    ["sk-proj-Abc123def456ghi789jkl012mno345", "openai_key"],
    ["sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", "anthropic_key"],
    ["AKIAIOSFODNN7EXAMPLE", "aws_access_key"],
    ["ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"],
    ["xoxb-123456789012-abcdefghijkl", "slack_token"],
    ["AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key"],
    ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"],
    ["gwsk_Zx9w0Q1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX3", "gateway_key"],
    [pem, "private_key"],
  ])("redacts %s as %s", (secret, kind) => {
    expect(redact(s, `key: ${secret} end`)).toBe(`key: [REDACTED:${kind}] end`);
  });

  it.each([
    "the task-list is long",
    "skip-this-step-please-and-continue",
    "AKIA is a prefix",
    "ghp_short",
    "eyJhbGciOiJIUzI1NiJ9 alone",
    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
  ])("leaves %j alone", (text) => {
    expect(hits(s, text)).toEqual([]);
  });

  it("redacts a private key with no END line to the end of the text", () => {
    expect(redact(s, "here: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg")).toBe(
      "here: [REDACTED:private_key]",
    );
  });
});

describe("pii", () => {
  const all: CheckInput[] = [{ type: "pii" }];
  it.each([
    ["write to jane.doe+x@mail.example.co.uk today", "write to [REDACTED:email] today"],
    ["call +44 20 7946 0958 now", "call [REDACTED:phone] now"],
    ["call (415) 555-0132 now", "call [REDACTED:phone] now"],
    ["call 415-555-0132 now", "call [REDACTED:phone] now"],
    ["card 4111 1111 1111 1111 ok", "card [REDACTED:card] ok"],
    ["card 5500-0000-0000-0004 ok", "card [REDACTED:card] ok"],
    ["iban GB82 WEST 1234 5698 7654 32 ok", "iban [REDACTED:iban] ok"],
    ["iban DE89370400440532013000 ok", "iban [REDACTED:iban] ok"],
  ])("redacts %j", (text, expected) => {
    expect(redact(all, text)).toBe(expected);
  });

  it.each([
    ["card 4111 1111 1111 1112", "a card number failing Luhn"],
    ["iban GB82 WEST 1234 5698 7654 33", "an IBAN failing mod 97"],
    ["on 2024-01-15 at noon", "a date"],
    ["host 192.168.100.200", "an IP address"],
    ["version 1.2.3", "a version"],
    ["order 123456789012", "a bare number"],
    ["user@localhost", "an address without a domain"],
    ["costs 1,299.00 euros", "a price"],
  ])("leaves %j alone (%s)", (text) => {
    expect(hits(all, text)).toEqual([]);
  });

  it("finds only the kinds asked for", () => {
    const text = "a@b.example and 4111 1111 1111 1111";
    expect(redact([{ type: "pii", kinds: ["email"] }], text)).toBe(
      "[REDACTED:email] and 4111 1111 1111 1111",
    );
    expect(evaluate([policy(all)], text, input).decisions[0]!.kinds).toEqual(["email", "card"]);
  });
});

describe("system_prompt_leakage", () => {
  const leak: CheckInput[] = [{ type: "system_prompt_leakage" }];
  const instructions = [
    "You are Aria, the support assistant of Example Corp. Never discuss pricing of the enterprise plan with anyone who is not logged in.",
  ];

  it("finds a passage of eight words shared with the instructions, however it is cased or spaced", () => {
    const answer = "Sure! My rules say: never DISCUSS pricing of the   enterprise plan with anyone.";
    expect(hits(leak, answer, { ...output, instructions })).toEqual(["system_prompt_leakage"]);
    expect(hits(leak, "I cannot discuss pricing here, sorry.", { ...output, instructions })).toEqual([]);
  });

  it("finds the canary the gateway placed, also with zero-width characters inside", () => {
    const canary = makeCanary();
    expect(canary).toMatch(/^gwc-[0-9a-f]{20}$/);
    expect(makeCanary()).not.toBe(canary);
    const placed = withCanary("Be brief.", canary);
    expect(placed.startsWith("Be brief.")).toBe(true);
    expect(placed).toContain(canary);
    const context = { ...output, instructions: [placed], canary };
    expect(hits(leak, `My reference is ${canary}.`, context)).toEqual(["system_prompt_leakage"]);
    const hidden = `${canary.slice(0, 9)}\u200B${canary.slice(9)}`;
    expect(hits(leak, `ref ${hidden}`, context)).toEqual(["system_prompt_leakage"]);
    expect(hits(leak, `ref ${makeCanary()}`, context)).toEqual([]);
    expect(redact(leak, `ref ${canary}.`, context)).toBe("ref [REDACTED:system_prompt].");
  });

  it("reads only output", () => {
    expect(hits(leak, instructions[0]!, { ...input, instructions })).toEqual([]);
  });
});

describe("evaluate", () => {
  it("runs a policy only in the direction it applies to", () => {
    const onInput = policy([{ type: "secrets" }], "block", "input");
    const text = "AKIAIOSFODNN7EXAMPLE";
    expect(evaluate([onInput], text, input).decisions).toHaveLength(1);
    expect(evaluate([onInput], text, output).decisions).toEqual([]);
    expect(evaluate([policy([{ type: "secrets" }], "block", "output")], text, output).decisions).toHaveLength(
      1,
    );
  });

  it("names the policy, the check and the action, and never holds the matched text", () => {
    const p = policy([{ type: "pii" }, { type: "ban_words", words: ["zebra"] }], "flag");
    const text = "a ZEBRA wrote to zoe@example.org";
    const r = evaluate([p], text, input);
    expect(r.redacted).toBeUndefined();
    expect(r.decisions).toEqual([
      {
        policyId: p.id,
        checkIndex: 0,
        check: "pii",
        action: "flag",
        kinds: ["email"],
        spans: [{ start: 17, end: 32, kind: "email" }],
      },
      {
        policyId: p.id,
        checkIndex: 1,
        check: "ban_words",
        action: "flag",
        kinds: ["ban_words"],
        spans: [{ start: 2, end: 7, kind: "ban_words" }],
      },
    ]);
    const logged = JSON.stringify(r.decisions);
    expect(logged).not.toMatch(/zebra|zoe|example/i);
  });

  it("redacts only for redact policies, merging overlapping spans", () => {
    const redacting = policy([{ type: "pii" }, { type: "ban_words", words: ["zoe"] }], "redact");
    const blocking = policy([{ type: "ban_words", words: ["hello"] }], "block");
    const r = evaluate([redacting, blocking], "hello zoe@example.org", input);
    expect(r.decisions.map((d) => [d.check, d.action])).toEqual([
      ["pii", "redact"],
      ["ban_words", "redact"],
      ["ban_words", "block"],
    ]);
    expect(r.redacted).toBe("hello [REDACTED:email]");
  });

  it("compiles a policy once per version", () => {
    const p = policy([{ type: "ban_words", words: ["alpha"] }]);
    expect(compile(p)).toBe(compile({ ...p }));
    const changed = {
      ...p,
      version: 2,
      checks: checksSchema.parse([{ type: "ban_words", words: ["beta"] }]),
    };
    expect(compile(changed)).not.toBe(compile(p));
    expect(evaluate([changed], "beta", input).decisions).toHaveLength(1);
    expect(evaluate([p], "beta", input).decisions).toEqual([]);
  });

  it("stays linear on inputs built against the built-in expressions", () => {
    const p = policy([
      { type: "prompt_injection" },
      { type: "secrets" },
      { type: "pii" },
      { type: "ban_words", words: ["x"] },
    ]);
    // Each would take minutes in a quadratic scan; they return with nothing (or the one thing) found.
    for (const text of [
      "a".repeat(100_000),
      "a@".repeat(50_000),
      "a.".repeat(50_000),
      "1 ".repeat(50_000),
      "12 34 ".repeat(16_000),
      "<|".repeat(50_000),
      `${"x".repeat(99_999)}@`,
    ]) {
      const r = evaluate([p], text, { direction: "output", instructions: [text] });
      expect(r.decisions.every((d) => d.check === "ban_words" || d.check === "pii")).toBe(true);
    }
  });
});
