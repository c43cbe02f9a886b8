/**
 * What a guardrail policy is made of: its checks, the direction it applies
 * to and what it does on a hit. The schemas here validate a policy at the
 * edge; `compile.ts` turns a valid one into matchers once.
 */
import { RE2JS } from "re2js";
import { z } from "zod";
import { words } from "./normalize.ts";

/** Limits of one policy, documented in docs/api/guardrails.md ("Checks"). */
export const GUARDRAIL_LIMITS = {
  /** Checks in one policy. */
  checks: 16,
  /** Entries in one `ban_words` check's `words`. */
  words: 10_000,
  /** Characters of one entry of `words`. */
  wordLength: 200,
  /** Entries in one `ban_words` check's `patterns`. */
  patterns: 50,
  /** Characters of one pattern. */
  patternLength: 500,
  /** Characters of a `judge_model` name. */
  judgeModelLength: 200,
} as const;

export const PII_KINDS = ["email", "phone", "card", "iban"] as const;
export type PiiKind = (typeof PII_KINDS)[number];

/**
 * Why RE2 refuses `pattern`, or undefined when it compiles. RE2 has no
 * backreferences or lookaround: that is what keeps every match linear.
 */
export function patternError(pattern: string): string | undefined {
  try {
    RE2JS.compile(pattern);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : "invalid pattern";
  }
}

const banWord = z
  .string()
  .min(1)
  .max(GUARDRAIL_LIMITS.wordLength)
  .refine((w) => words(w).words.length > 0, { message: "A banned word must contain a letter or a digit" });

const banPattern = z
  .string()
  .min(1)
  .max(GUARDRAIL_LIMITS.patternLength)
  .superRefine((pattern, ctx) => {
    const error = patternError(pattern);
    // RE2's own message names the construct it refuses; it quotes only the pattern, which the caller sent.
    if (error) ctx.addIssue({ code: "custom", message: `Not a pattern RE2 accepts: ${error}` });
  });

export const banWordsCheckSchema = z
  .object({
    type: z.literal("ban_words"),
    /** Words and phrases matched on word boundaries after normalization. */
    words: z.array(banWord).max(GUARDRAIL_LIMITS.words).default([]),
    /** RE2 regular expressions matched against the text as sent. */
    patterns: z.array(banPattern).max(GUARDRAIL_LIMITS.patterns).default([]),
    /** Also read digits and signs as the letters they imitate (0→o, 1→i, 3→e, 4→a, 5→s, 7→t, @→a, $→s). */
    leetspeak: z.boolean().default(false),
  })
  .strict()
  .refine((c) => c.words.length + c.patterns.length > 0, {
    message: "A ban_words check needs words or patterns",
  });

export const promptInjectionCheckSchema = z
  .object({
    type: z.literal("prompt_injection"),
    /** A model that also judges the text; called by the model-call pipeline, not by these checks. */
    judge_model: z.string().min(1).max(GUARDRAIL_LIMITS.judgeModelLength).optional(),
  })
  .strict();

export const systemPromptLeakageCheckSchema = z.object({ type: z.literal("system_prompt_leakage") }).strict();

export const secretsCheckSchema = z.object({ type: z.literal("secrets") }).strict();

export const piiCheckSchema = z
  .object({
    type: z.literal("pii"),
    /** Which kinds to find; all of them when left out. */
    kinds: z.array(z.enum(PII_KINDS)).min(1).max(PII_KINDS.length).optional(),
  })
  .strict();

export const checkSchema = z.discriminatedUnion("type", [
  banWordsCheckSchema,
  promptInjectionCheckSchema,
  systemPromptLeakageCheckSchema,
  secretsCheckSchema,
  piiCheckSchema,
]);
export type Check = z.output<typeof checkSchema>;
export type CheckInput = z.input<typeof checkSchema>;
export type CheckType = Check["type"];
export const CHECK_TYPES = [
  "ban_words",
  "prompt_injection",
  "system_prompt_leakage",
  "secrets",
  "pii",
] as const satisfies readonly CheckType[];

export const APPLIES_TO = ["input", "output", "both"] as const;
export type AppliesTo = (typeof APPLIES_TO)[number];
export const ACTIONS = ["block", "redact", "flag"] as const;
export type Action = (typeof ACTIONS)[number];

export const checksSchema = z.array(checkSchema).min(1).max(GUARDRAIL_LIMITS.checks);

/** The checking part of a policy as a client sends it (the resource adds `name`, `id` and the rest). */
export const policyFieldsSchema = z.object({
  checks: checksSchema,
  applies_to: z.enum(APPLIES_TO),
  action: z.enum(ACTIONS),
});

/**
 * A policy as `evaluate` takes it. `version` changes whenever the policy does
 * (its update time or a counter): compiled matchers are cached by id and version.
 */
export interface Policy {
  id: string;
  version?: string | number;
  checks: readonly Check[];
  applies_to: AppliesTo;
  action: Action;
}
