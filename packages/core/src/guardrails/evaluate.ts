/**
 * The one entry every model-call path calls: `evaluate(policies, text,
 * context)`. Policies are compiled once per id and version (`compile`), so a
 * call compiles no expression; each check then reads the text once.
 */
import { LRUCache } from "lru-cache";
import { entryBound } from "../bounded-cache.ts";
import { type CompiledBanWords, compileBanWords, matchBanWords } from "./ban-words.ts";
import { type Action, type Check, type CheckType, PII_KINDS, type PiiKind, type Policy } from "./checks.ts";
import { matchLeakage } from "./leakage.ts";
import { type Words, words } from "./normalize.ts";
import { matchPii } from "./pii.ts";
import { detectPromptInjection, type InjectionFamily } from "./prompt-injection.ts";
import { matchSecrets } from "./secrets.ts";
import { type MatchOptions, mergeSpans, redactSpans, type Span } from "./span.ts";

export type Direction = "input" | "output";

export interface EvaluateContext {
  direction: Direction;
  /** The request's system and developer messages and `instructions`, for `system_prompt_leakage`. */
  instructions?: readonly string[];
  /** The canary the gateway placed in those instructions (`makeCanary`, `withCanary`). */
  canary?: string;
  /** The text is a stream so far: matches reaching its end wait for more (see `StreamHoldback`). */
  partial?: boolean;
}

/** One policy's check that found something. Holds no matched text: safe to log and audit. */
export interface Decision {
  policyId: string;
  /** The check's position in the policy's `checks`. */
  checkIndex: number;
  check: CheckType;
  action: Action;
  /** What was found, by type (`email`, `openai_key`, `instruction_override`, …), without the text. */
  kinds: string[];
  /** Where, in the text as given (UTF-16 offsets); for redaction, not for logs. */
  spans: Span[];
}

export interface Evaluation {
  decisions: Decision[];
  /** The text with the spans of every `redact` decision replaced; present when there is one. */
  redacted?: string;
}

type CompiledCheck =
  | { type: "ban_words"; matcher: CompiledBanWords }
  | { type: "prompt_injection" }
  | { type: "system_prompt_leakage" }
  | { type: "secrets" }
  | { type: "pii"; kinds: readonly PiiKind[] };

export interface CompiledPolicy {
  readonly id: string;
  readonly applies_to: Policy["applies_to"];
  readonly action: Action;
  readonly checks: readonly CompiledCheck[];
  /** Characters a stream must hold back so this policy's longest banned phrase is seen whole. */
  readonly holdback: number;
}

function compileCheck(check: Check): CompiledCheck {
  switch (check.type) {
    case "ban_words":
      return { type: "ban_words", matcher: compileBanWords(check) };
    case "pii":
      return { type: "pii", kinds: check.kinds ?? PII_KINDS };
    default:
      return { type: check.type };
  }
}

const BY_VERSION = new LRUCache<string, CompiledPolicy>(entryBound(2_000));
const BY_OBJECT = new WeakMap<Policy, CompiledPolicy>();

/**
 * The policy's matchers, built once: cached by `id` and `version` (a new
 * version compiles again), or by the object itself when it has no version.
 * The policy must have passed `policyFieldsSchema`.
 */
export function compile(policy: Policy): CompiledPolicy {
  const key = policy.version === undefined ? undefined : `${policy.id}\u0000${policy.version}`;
  const cached = key ? BY_VERSION.get(key) : BY_OBJECT.get(policy);
  if (cached) return cached;
  const checks = policy.checks.map(compileCheck);
  const compiled: CompiledPolicy = {
    id: policy.id,
    applies_to: policy.applies_to,
    action: policy.action,
    checks,
    holdback: Math.max(64, ...checks.map((c) => (c.type === "ban_words" ? c.matcher.longest : 0))),
  };
  if (key) BY_VERSION.set(key, compiled);
  else BY_OBJECT.set(policy, compiled);
  return compiled;
}

function isCompiled(p: Policy | CompiledPolicy): p is CompiledPolicy {
  return "holdback" in p;
}

/**
 * The text under evaluation, its words cut once however many checks read
 * them (normalizing is most of what the word checks cost).
 */
class Text {
  readonly text: string;
  private plain?: Words;
  private leet?: Words;
  constructor(text: string) {
    this.text = text;
  }
  words(leetspeak = false): Words {
    if (leetspeak) {
      this.leet ??= words(this.text, true);
      return this.leet;
    }
    this.plain ??= words(this.text);
    return this.plain;
  }
}

function runCheck(c: CompiledCheck, t: Text, context: EvaluateContext): { spans: Span[]; kinds: string[] } {
  const options: MatchOptions = { partial: context.partial };
  const text = t.text;
  switch (c.type) {
    case "ban_words": {
      const spans = matchBanWords(
        c.matcher,
        text,
        options,
        c.matcher.root.size > 0 ? t.words(c.matcher.leetspeak) : undefined,
      );
      return { spans, kinds: spans.length ? ["ban_words"] : [] };
    }
    case "prompt_injection": {
      const hits = detectPromptInjection(text, options, t.words());
      const families = [...new Set<InjectionFamily>(hits.map((h) => h.family))];
      return { spans: hits.map((h) => h.span), kinds: families };
    }
    case "system_prompt_leakage": {
      // Leakage is the answer repeating the instructions: only output is read.
      if (context.direction !== "output") return { spans: [], kinds: [] };
      const instructions = context.instructions ?? [];
      if (instructions.length === 0 && !context.canary) return { spans: [], kinds: [] };
      const spans = matchLeakage(text, instructions, context.canary, options, t.words());
      return { spans, kinds: spans.length ? ["system_prompt"] : [] };
    }
    case "secrets": {
      const spans = matchSecrets(text, options);
      return { spans, kinds: [...new Set(spans.map((s) => s.kind))] };
    }
    case "pii": {
      const spans = matchPii(text, c.kinds, options);
      return { spans, kinds: [...new Set(spans.map((s) => s.kind))] };
    }
  }
}

/**
 * Runs every policy that applies to `context.direction` over `text`. One
 * decision per check that found something, in policy then check order; the
 * caller blocks if any decision's action is `block`, sends `redacted` on if
 * any is `redact`, and records every one.
 */
export function evaluate(
  policies: readonly (Policy | CompiledPolicy)[],
  text: string,
  context: EvaluateContext,
): Evaluation {
  const decisions: Decision[] = [];
  const toRedact: Span[] = [];
  const t = new Text(text);
  for (const p of policies) {
    const policy = isCompiled(p) ? p : compile(p);
    if (policy.applies_to !== "both" && policy.applies_to !== context.direction) continue;
    policy.checks.forEach((c, checkIndex) => {
      const { spans, kinds } = runCheck(c, t, context);
      if (spans.length === 0) return;
      const merged = mergeSpans(spans);
      decisions.push({
        policyId: policy.id,
        checkIndex,
        check: c.type,
        action: policy.action,
        kinds,
        spans: merged,
      });
      if (policy.action === "redact") toRedact.push(...merged);
    });
  }
  return toRedact.length > 0 ? { decisions, redacted: redactSpans(text, toRedact) } : { decisions };
}

/** Characters a stream must hold back for these policies (the longest banned phrase, at least 64). */
export function holdbackFor(policies: readonly (Policy | CompiledPolicy)[]): number {
  return Math.max(64, ...policies.map((p) => (isCompiled(p) ? p : compile(p)).holdback));
}
