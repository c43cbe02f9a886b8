import { GuardrailBlocked } from "@gw/core/errors";
import { makeCanary, withCanary as placeCanary, StreamHoldback } from "@gw/core/guardrails";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { Principal } from "@gw/core/principal";
import { Counter } from "prom-client";
import {
  type ChatMessage,
  type ChatProvider,
  type ChatRequest,
  type Completion,
  type CompletionChoice,
  type StreamSeen,
  type ToolCallDelta,
  usageOf,
} from "../llm/provider.ts";
import { type JudgeDeps, JudgeFailed, judgeInjection, judgeUnavailable } from "./guardrail-judge.ts";

/**
 * Guardrails in the model-call pipeline (calls/model-call.ts): every call's
 * input is checked before admission (a block is a 400 `guardrail_blocked`,
 * nothing reserved, the provider never called), its output once whole (a
 * JSON answer) or as it streams, held back by `holdbackChars` so that text a
 * check blocks never reaches the client. A block ends the answer as OpenAI
 * ends a filtered one (`finishReason: "content_filter"`); `redact` passes the
 * redacted text on; `flag` only records. Each decision is counted
 * (`guardrail_decisions_total{check,action}`) and audited, never with the text.
 */

export type GuardrailAction = "block" | "redact" | "flag";

/** A guardrail as it applies to a call: its checks are the checks library's objects, read only by `evaluate`. */
export interface GuardrailPolicy {
  id: string;
  name: string;
  checks: readonly { type: string; [param: string]: unknown }[];
  applies_to: "input" | "output" | "both";
  action: GuardrailAction;
}

/** What one check of one guardrail decided about a text. */
export interface GuardrailDecision {
  guardrail: string;
  check: string;
  action: GuardrailAction;
}

export interface GuardrailContext {
  direction: "input" | "output";
  /** The request's instructions (system and developer messages): what `system_prompt_leakage` looks for in output. */
  instructions?: readonly string[];
  /** The marker placed in the instructions sent to the provider, watched for in output. */
  canary?: string;
  /** The text is a stream so far: a match reaching its end waits for more. */
  partial?: boolean;
}

/** The checks library's one entry: decisions about `text`, and the text with what `redact` policies matched replaced. */
export type GuardrailEvaluator = (
  policies: readonly GuardrailPolicy[],
  text: string,
  context: GuardrailContext,
) => { decisions: GuardrailDecision[]; redacted?: string | undefined };

/** The guardrails attached to a call: to the caller's organization, its key, or the model. */
export interface GuardrailSource {
  /** `version`: the organization's guardrail version as the request already read it (`Caller.guardrailVersion`). */
  policiesFor(
    principal: Principal,
    model: string,
    version?: Promise<string | undefined>,
  ): Promise<GuardrailPolicy[]>;
}

/** One decision as audited: who, which request, which guardrail and check, what it did; never the text. */
export interface GuardrailDecisionRecord extends GuardrailDecision {
  principal: Principal;
  requestId: string;
  direction: "input" | "output";
}

export interface GuardrailDeps {
  source: GuardrailSource;
  evaluate: GuardrailEvaluator;
  /** Writes the audit record of a decision (best effort: a failure is logged, the call goes on as decided). */
  audit(record: GuardrailDecisionRecord): Promise<void>;
  metrics: Metrics;
  logger: Logger;
  /** `GUARDRAIL_STREAM_HOLDBACK_CHARS`: characters of a streamed answer kept back until the checks have seen what follows them. */
  holdbackChars: number;
  /** The window the policies themselves need (their longest banned phrase): a stream holds back the larger. */
  holdbackFor?: (policies: readonly GuardrailPolicy[]) => number;
  /** What `prompt_injection` checks with a `judge_model` call; none: such a judge never answers (see `judgeInput`). */
  judge?: JudgeDeps | undefined;
}

/** The checks library's canary (`makeCanary`): found again in the instructions of a later round of one turn. */
const CANARY = /gwc-[0-9a-f]{20}/;

const CHECK_TYPES = ["ban_words", "prompt_injection", "system_prompt_leakage", "secrets", "pii"];
const ACTIONS: GuardrailAction[] = ["block", "redact", "flag"];

/** The decisions counter, its series for every check and action made at zero. */
export function createGuardrailMetrics(metrics: Metrics) {
  const decisions = new Counter({
    name: `${metrics.prefix}_guardrail_decisions_total`,
    help: "Guardrail decisions on model calls' input and output, by check type and action (block, redact, flag).",
    labelNames: ["check", "action"] as const,
    registers: [metrics.registry],
  });
  for (const check of CHECK_TYPES) for (const action of ACTIONS) decisions.inc({ check, action }, 0);
  return decisions;
}

/** The judges' answers counter (`verdict`: `injection`, `safe`, `none`), each series made at zero. */
function createJudgeMetrics(metrics: Metrics) {
  const verdicts = new Counter({
    name: `${metrics.prefix}_guardrail_judge_verdicts_total`,
    help: "Answers of prompt_injection checks' model judges: injection, safe, or none (no verdict: provider error, timeout, another answer).",
    labelNames: ["verdict"] as const,
    registers: [metrics.registry],
  });
  for (const verdict of ["injection", "safe", "none"]) verdicts.inc({ verdict }, 0);
  return verdicts;
}

/** The guardrails of a process's model calls: `forCall` finds those of one call and checks its input. */
export class ModelGuardrails {
  private readonly deps: GuardrailDeps;
  private readonly decisions: Counter<"check" | "action">;
  private readonly verdicts: Counter<"verdict">;

  constructor(deps: GuardrailDeps) {
    this.deps = deps;
    this.decisions = createGuardrailMetrics(deps.metrics);
    this.verdicts = createJudgeMetrics(deps.metrics);
  }

  /**
   * Checks `request`'s input against the guardrails attached for the caller
   * and the model: throws `GuardrailBlocked` on a block; otherwise replaces
   * `request.messages` with their redacted text (and the canary in the
   * instructions, when an output check watches for leakage) and returns the
   * guard of the call's output. None when no guardrail applies.
   */
  async forCall(
    caller: {
      principal: Principal;
      requestId?: string | undefined;
      guardrailVersion?: Promise<string | undefined> | undefined;
    },
    request: ChatRequest,
  ): Promise<CallGuard | undefined> {
    // Read as the request came in: it holds for the request's first call only (a turn's later rounds read anew).
    const version = caller.guardrailVersion;
    caller.guardrailVersion = undefined;
    const policies = await this.deps.source.policiesFor(caller.principal, request.model, version);
    if (policies.length === 0) return undefined;
    const record = (decisions: GuardrailDecision[], direction: "input" | "output") =>
      this.record(caller.principal, caller.requestId ?? "", decisions, direction);
    const input = policies.filter((p) => p.applies_to !== "output");
    const output = policies.filter((p) => p.applies_to !== "input");
    const instructions = request.messages
      .filter((m) => m.role === "system" || m.role === "developer")
      .map((m) => m.content)
      .filter(Boolean);
    const leakage = output.some((p) => p.checks.some((c) => c.type === "system_prompt_leakage"));
    // A later round of one turn (hosted MCP tools) sends the instructions again: the canary already in them is kept.
    const placed = instructions.map((text) => CANARY.exec(text)?.[0]).find(Boolean);
    const canary = leakage && instructions.length > 0 ? (placed ?? makeCanary()) : undefined;
    const guard = new CallGuard(
      this.deps,
      { input, output, all: policies },
      { instructions, ...(canary ? { canary } : {}) },
      record,
      caller,
      (verdict) => this.verdicts.inc({ verdict }),
    );
    await guard.checkInput(request);
    if (canary && !placed) request.messages = withCanary(request.messages, canary);
    return guard;
  }

  private record(
    principal: Principal,
    requestId: string,
    decisions: GuardrailDecision[],
    direction: "input" | "output",
  ): void {
    for (const decision of decisions) {
      this.decisions.inc({ check: decision.check, action: decision.action });
      this.deps
        .audit({ ...decision, principal, requestId, direction })
        .catch((err: unknown) =>
          this.deps.logger.error(
            { requestId, err, guardrail: decision.guardrail, check: decision.check },
            "the audit record of a guardrail decision could not be written",
          ),
        );
    }
  }
}

/**
 * How much of each side of a seam between two messages is checked again: more than the longest banned
 * word (200 characters) or pattern (500) could need.
 */
const SEAM_CHARS = 512;

function policyOf(policies: readonly GuardrailPolicy[], id: string): GuardrailPolicy {
  return (
    policies.find((p) => p.id === id) ?? { id, name: id, checks: [], applies_to: "both", action: "block" }
  );
}

/** The messages with the canary in the first system or developer message (copies: the caller's stay as they were). */
function withCanary(messages: ChatMessage[], canary: string): ChatMessage[] {
  const at = messages.findIndex((m) => m.role === "system" || m.role === "developer");
  return messages.map((m, i) => (i === at ? { ...m, content: placeCanary(m.content, canary) } : m));
}

/** A completion cut where a guardrail blocked it: what the client was shown, and no tool call. */
function filtered<C extends CompletionChoice>(completion: C, shown: string): C {
  return { ...completion, text: shown, toolCalls: [], finishReason: "content_filter", logprobs: undefined };
}

/** A call's guardrails: those that check its input, its output, and all of them. */
interface GuardrailSets {
  input: readonly GuardrailPolicy[];
  output: readonly GuardrailPolicy[];
  all: readonly GuardrailPolicy[];
}

/** The guard of one call's output (`ModelGuardrails.forCall`). */
export class CallGuard {
  /** The guardrails that redacted this call's input or output: the `x-guardrail-redacted` header. */
  readonly redactedBy = new Set<string>();
  private readonly policies: readonly GuardrailPolicy[];
  private readonly deps: GuardrailDeps;
  private readonly attached: GuardrailSets;
  private readonly context: { instructions: readonly string[]; canary?: string };
  private readonly record: (decisions: GuardrailDecision[], direction: "input" | "output") => void;
  private readonly caller: { principal: Principal; requestId?: string | undefined };
  private readonly counted: (verdict: "injection" | "safe" | "none") => void;
  /** Texts a model judge has already read for this call: a later round judges only what was added. */
  private readonly judged = new Set<string>();

  constructor(
    deps: GuardrailDeps,
    attached: GuardrailSets,
    context: { instructions: readonly string[]; canary?: string },
    record: (decisions: GuardrailDecision[], direction: "input" | "output") => void,
    caller: { principal: Principal; requestId?: string | undefined },
    counted: (verdict: "injection" | "safe" | "none") => void,
  ) {
    this.deps = deps;
    this.counted = counted;
    this.attached = attached;
    this.context = context;
    this.record = record;
    this.caller = caller;
    this.policies = attached.output;
  }

  /**
   * Checks what the model will read (every message but the assistant's own
   * earlier turns, which were output and checked as such): throws
   * `GuardrailBlocked` on a block, else replaces `request.messages` with
   * their redacted text. Called at admission, and again when the prompt
   * grows after it (hosted MCP tools' results: indirect injection). When
   * the checks did not block, the model judges of `prompt_injection` checks
   * read what is new (`judgeInput`).
   */
  async checkInput(request: ChatRequest): Promise<void> {
    const { input, all } = this.attached;
    if (input.length === 0) return;
    const decisions: GuardrailDecision[] = [];
    let changed = false;
    const messages = request.messages.map((message) => {
      if (message.role === "assistant" || !message.content) return message;
      const checked = this.deps.evaluate(input, message.content, { direction: "input" });
      decisions.push(...checked.decisions);
      if (checked.redacted === undefined || checked.redacted === message.content) return message;
      changed = true;
      return { ...message, content: checked.redacted };
    });
    decisions.push(...this.acrossMessages(input, messages, decisions));
    this.record(decisions, "input");
    const block = decisions.find((d) => d.action === "block");
    if (block) throw new GuardrailBlocked(policyOf(all, block.guardrail), block.check);
    const judged = await this.judgeInput(messages, decisions);
    this.record(judged, "input");
    const judgedBlock = judged.find((d) => d.action === "block");
    if (judgedBlock) throw new GuardrailBlocked(policyOf(all, judgedBlock.guardrail), judgedBlock.check);
    for (const d of decisions) if (d.action === "redact") this.redactedBy.add(d.guardrail);
    if (changed) request.messages = messages;
  }

  /**
   * What the checks find only where one message the model reads ends and the next begins (a banned word
   * sent as "zor" then "blax", a phrase cut between two messages): the end of each and the start of the
   * next, run together and with a space between, checked again. Only what no single message showed
   * counts (each guardrail's check once). A `redact` guardrail cannot cut text across two messages: such
   * a find blocks the call instead (what its guardrail exists to stop never reaches the model).
   */
  private acrossMessages(
    input: readonly GuardrailPolicy[],
    messages: readonly ChatMessage[],
    found: readonly GuardrailDecision[],
  ): GuardrailDecision[] {
    const read = messages.filter((m) => m.role !== "assistant" && m.content);
    if (read.length < 2) return [];
    const seen = new Set(found.map((d) => `${d.guardrail}\u0000${d.check}`));
    const more: GuardrailDecision[] = [];
    for (let i = 1; i < read.length; i++) {
      const end = read[i - 1]!.content.slice(-SEAM_CHARS);
      const start = read[i]!.content.slice(0, SEAM_CHARS);
      for (const seam of [end + start, `${end} ${start}`]) {
        for (const decision of this.deps.evaluate(input, seam, { direction: "input" }).decisions) {
          const key = `${decision.guardrail}\u0000${decision.check}`;
          if (seen.has(key)) continue;
          seen.add(key);
          more.push(decision.action === "redact" ? { ...decision, action: "block" } : decision);
        }
      }
    }
    return more;
  }

  /**
   * Asks the judge of each input guardrail's `prompt_injection` check that
   * names a `judge_model` (and whose built-in detector found nothing: its
   * decision is already made) about the user and tool messages not judged
   * before, as the model will read them (redacted). A verdict of injection
   * is a `prompt_injection` decision with the guardrail's action (`redact`
   * counts as `flag`: a judge says whether, not where). A judge that gives
   * no verdict is logged; for a `block` guardrail it refuses the call (503,
   * fail closed), for the others the call goes on.
   */
  private async judgeInput(
    messages: ChatMessage[],
    found: GuardrailDecision[],
  ): Promise<GuardrailDecision[]> {
    const judges = this.attached.input.flatMap((policy) => {
      const check = policy.checks.find(
        (c) => c.type === "prompt_injection" && typeof c.judge_model === "string",
      );
      const decided = found.some((d) => d.guardrail === policy.id && d.check === "prompt_injection");
      return check && !decided ? [{ policy, model: check.judge_model as string }] : [];
    });
    if (judges.length === 0) return [];
    // Instructions (system, developer) are the caller's own; injection arrives in what users and tools say.
    const fresh = messages.filter(
      (m) => (m.role === "user" || m.role === "tool") && m.content && !this.judged.has(m.content),
    );
    if (fresh.length === 0) return [];
    const text = fresh.map((m) => m.content).join("\n\n");
    const verdicts = await Promise.all(
      judges.map(async ({ policy, model }) => {
        try {
          if (!this.deps.judge) throw new JudgeFailed("no judge is configured");
          const verdict = await judgeInjection(this.deps.judge, this.caller, policy.name, model, text);
          this.counted(verdict);
          return { policy, verdict };
        } catch (err) {
          this.counted("none");
          const reason = err instanceof JudgeFailed ? err.reason : "error";
          this.deps.logger.warn(
            {
              requestId: this.caller.requestId,
              org: this.caller.principal.org,
              guardrail: policy.id,
              judgeModel: model,
              reason,
              failClosed: policy.action === "block",
            },
            "the prompt-injection judge of a guardrail gave no verdict",
          );
          if (policy.action === "block") return { policy, failed: true };
          return { policy, verdict: "safe" as const };
        }
      }),
    );
    for (const m of fresh) this.judged.add(m.content);
    const failed = verdicts.find((v) => "failed" in v);
    const decisions = verdicts.flatMap((v): GuardrailDecision[] =>
      "verdict" in v && v.verdict === "injection"
        ? [
            {
              guardrail: v.policy.id,
              check: "prompt_injection",
              action: v.policy.action === "redact" ? "flag" : v.policy.action,
            },
          ]
        : [],
    );
    // A verdict of injection under a block is the answer; a judge that failed refuses only without one.
    if (failed && !decisions.some((d) => d.action === "block")) {
      this.record(decisions, "input");
      throw judgeUnavailable(failed.policy);
    }
    return decisions;
  }

  /** Checks `text`, recording its decisions (unless `record: false`): blocked, or the text to pass on. */
  private check(
    text: string,
    options: { record?: boolean; partial?: boolean } = {},
  ): { blocked: boolean; text: string; decisions: GuardrailDecision[] } {
    if (this.policies.length === 0 || !text) return { blocked: false, text, decisions: [] };
    const { decisions, redacted } = this.deps.evaluate(this.policies, text, {
      direction: "output",
      ...this.context,
      ...(options.partial ? { partial: true } : {}),
    });
    if (options.record !== false) this.note(decisions);
    return { blocked: decisions.some((d) => d.action === "block"), text: redacted ?? text, decisions };
  }

  private note(decisions: GuardrailDecision[]): void {
    this.record(decisions, "output");
    for (const d of decisions) if (d.action === "redact") this.redactedBy.add(d.guardrail);
  }

  /**
   * A whole answer checked: its text and each tool call's arguments (output
   * too), and so every other answer of a call for several (`n`), each
   * filtered on its own when blocked.
   */
  completion(completion: Completion): Completion {
    const checked = this.choice(completion);
    const more = completion.moreChoices?.map((choice) => this.choice(choice));
    return { ...completion, ...checked, ...(more ? { moreChoices: more } : {}) };
  }

  /** One answer checked: as it was (redacted where a policy said so), or emptied as `content_filter`. */
  private choice<C extends CompletionChoice>(choice: C): C {
    const text = this.check(choice.text);
    const calls = choice.toolCalls.map((call) => ({ call, checked: this.check(call.arguments) }));
    if (text.blocked || calls.some((c) => c.checked.blocked)) return filtered(choice, "");
    return {
      ...choice,
      text: text.text,
      toolCalls: calls.map(({ call, checked }) => ({ ...call, arguments: checked.text })),
    };
  }

  /** `provider` with this call's output checked: whole answers as `completion`, streams held back. */
  provider(provider: ChatProvider): ChatProvider {
    if (this.policies.length === 0) return provider;
    return Object.assign(Object.create(provider) as ChatProvider, {
      complete: async (request: ChatRequest, signal: AbortSignal) =>
        this.completion(await provider.complete(request, signal)),
      stream: (request: ChatRequest, signal: AbortSignal, seen?: StreamSeen) =>
        this.stream(provider.stream(request, signal, seen), request, seen),
    });
  }

  /**
   * Relays a stream's text all but its last `holdbackChars`, each release
   * after the checks saw everything before it: a match no longer than the
   * window is caught before any of it is sent. Tool calls are held whole
   * and sent once their arguments pass. A block stops the stream (the
   * provider's stream is closed) and returns a completion cut where the
   * client's text ends, `content_filter`, charged for what the model
   * produced (estimated, as a broken stream is).
   */
  async *stream(
    pieces: AsyncGenerator<string | ToolCallDelta, Completion>,
    request: ChatRequest,
    seen: StreamSeen | undefined,
  ): AsyncGenerator<string | ToolCallDelta, Completion> {
    const hold = new StreamHoldback(
      Math.max(this.deps.holdbackChars, this.deps.holdbackFor?.(this.policies) ?? 0),
    );
    const calls: ToolCallDelta[] = [];
    const cut = async (): Promise<Completion> => {
      await pieces.return(undefined as never).catch(() => undefined);
      return {
        text: hold.text.slice(0, hold.releasedLength),
        toolCalls: [],
        finishReason: "content_filter",
        model: seen?.model ?? request.model,
        usage: usageOf(undefined, request.messages, hold.text + calls.map((c) => c.arguments).join("")),
        usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
        servedBy: seen?.servedBy,
      };
    };
    let step = await pieces.next();
    while (!step.done) {
      const piece = step.value;
      if (typeof piece !== "string") calls.push(piece);
      else if (piece) {
        hold.push(piece);
        if (hold.releasable() > hold.releasedLength) {
          // Only the tail that can hold a match not yet seen whole is read again (a match no longer than
          // the window ends past what was checked before, so it starts within a window of what was
          // released): each piece costs the window and the piece, not the answer so far. The whole
          // answer is checked at its end. Decisions are recorded then; here they only gate releases.
          const from = wordStart(hold.text, Math.max(0, hold.releasedLength - hold.window));
          const tail = hold.text.slice(from);
          const checked = this.check(tail, { record: false, partial: true });
          // Redacting a stream as it goes would move text already sent: a redaction waits for the end,
          // and one that reaches what was released blocks (the window was shorter than the match).
          const redactsReleased =
            checked.text !== tail && !sameUpTo(checked.text, tail, hold.releasedLength - from);
          if (checked.blocked || redactsReleased) {
            this.note(checked.decisions);
            return await cut();
          }
          if (checked.text === tail) {
            const release = hold.release();
            if (release) yield release;
          }
        }
      }
      step = await pieces.next();
    }
    const completion = step.value;
    const shown = hold.text.slice(0, hold.releasedLength);
    const text = this.check(hold.text);
    const args =
      calls.length > 0 ? joinCalls(calls).map((c) => ({ c, checked: this.check(c.arguments) })) : [];
    if (text.blocked || !text.text.startsWith(shown) || args.some((a) => a.checked.blocked)) {
      const done = await cut();
      return { ...done, usage: completion.usage, usageDetails: completion.usageDetails };
    }
    if (text.text.length > shown.length) yield text.text.slice(shown.length);
    for (const { c, checked } of args) yield { ...c, arguments: checked.text };
    return {
      ...completion,
      text: text.text,
      toolCalls: completion.toolCalls.map((call, i) => ({
        ...call,
        arguments: args[i]?.checked.text ?? call.arguments,
      })),
    };
  }
}

/** The start of the word at `at` (back to the whitespace before it, at most 256 characters back). */
function wordStart(text: string, at: number): number {
  let i = at;
  while (i > 0 && at - i < 256 && !/\s/.test(text[i - 1]!)) i--;
  return i > 0 && !/\s/.test(text[i - 1]!) ? at : i;
}

/** Whether `a` and `b` agree on their first `n` characters. */
const sameUpTo = (a: string, b: string, n: number) => a.length >= n && a.slice(0, n) === b.slice(0, n);

/** A stream's tool call pieces joined into one piece per call, in the order they came. */
function joinCalls(pieces: ToolCallDelta[]): ToolCallDelta[] {
  const byIndex = new Map<number, ToolCallDelta>();
  for (const piece of pieces) {
    const known = byIndex.get(piece.index);
    if (known) known.arguments += piece.arguments;
    else byIndex.set(piece.index, { ...piece });
  }
  return [...byIndex.values()];
}
