/**
 * Guardrail checks: pure functions over text, no I/O. See
 * docs/api/guardrails.md ("Checks") for what each check finds and its limits.
 */
export {
  ACTIONS,
  type Action,
  APPLIES_TO,
  type AppliesTo,
  banWordsCheckSchema,
  CHECK_TYPES,
  type Check,
  type CheckInput,
  type CheckType,
  checkSchema,
  checksSchema,
  GUARDRAIL_LIMITS,
  PII_KINDS,
  type PiiKind,
  type Policy,
  patternError,
  piiCheckSchema,
  policyFieldsSchema,
  promptInjectionCheckSchema,
  secretsCheckSchema,
  systemPromptLeakageCheckSchema,
} from "./checks.ts";
export {
  type CompiledPolicy,
  compile,
  type Decision,
  type Direction,
  type EvaluateContext,
  type Evaluation,
  evaluate,
  holdbackFor,
} from "./evaluate.ts";
export { makeCanary, SHINGLE_WORDS, withCanary } from "./leakage.ts";
export { INJECTION_FAMILIES, type InjectionFamily } from "./prompt-injection.ts";
export { redactSpans, type Span } from "./span.ts";
export { StreamHoldback } from "./stream.ts";
