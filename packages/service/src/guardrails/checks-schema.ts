import { z } from "zod";
import { byType } from "../schema.ts";

/**
 * The `checks` a guardrail accepts, validated at the edge: the five kinds
 * and their parameters, each bounded so that no policy can cost more than
 * its limits allow. The checks library of `@gw/core/guardrails` evaluates
 * them; this schema is the API's until that library's own replaces it.
 */

/** Checks in one guardrail, at most. */
export const MAX_CHECKS = 16;
/** Banned words and phrases in one `ban_words` check, at most. */
export const MAX_BANNED_WORDS = 10_000;
/** Regular expressions in one `ban_words` check, at most. */
export const MAX_BANNED_PATTERNS = 1_000;

const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((v) => !v.includes("\u0000"), {
      message: "Text must not contain U+0000",
      params: { type: "value_error" },
    });

const banWords = z.strictObject({
  type: z.literal("ban_words"),
  words: z.array(text(256)).max(MAX_BANNED_WORDS).default([]),
  patterns: z.array(text(1024)).max(MAX_BANNED_PATTERNS).default([]),
});

const promptInjection = z.strictObject({
  type: z.literal("prompt_injection"),
  judge_model: text(256).optional(),
});

const systemPromptLeakage = z.strictObject({ type: z.literal("system_prompt_leakage") });

const secrets = z.strictObject({ type: z.literal("secrets") });

export const PII_KINDS = ["email", "phone", "card", "iban"] as const;

const pii = z.strictObject({
  type: z.literal("pii"),
  kinds: z.array(z.enum(PII_KINDS)).min(1).max(PII_KINDS.length).optional(),
});

export const guardrailCheck = byType("Check", {
  ban_words: banWords,
  prompt_injection: promptInjection,
  system_prompt_leakage: systemPromptLeakage,
  secrets,
  pii,
});

export type GuardrailCheck = z.output<typeof guardrailCheck>;

export const guardrailChecks = z.array(guardrailCheck).min(1).max(MAX_CHECKS);
