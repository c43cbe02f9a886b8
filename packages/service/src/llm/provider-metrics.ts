import { LATENCY_BUCKETS, type Metrics } from "@gw/core/metrics";
import { Counter, Histogram } from "prom-client";
import { ProviderNotConfigured, ProviderRateLimited, ProviderTimeout } from "./errors.ts";
import { ChatProvider, type Completion, type ProviderOptions } from "./provider.ts";

/** How a call to the model provider ended: `cancelled` when our caller went away first. */
export const PROVIDER_OUTCOMES = ["ok", "error", "rate_limited", "timeout", "cancelled"] as const;
type Outcome = (typeof PROVIDER_OUTCOMES)[number];

/** Model provider calls in the process's registry. No model, user or key in labels. */
export function createProviderMetrics(metrics: Metrics) {
  const registers = [metrics.registry];
  const requests = new Counter({
    name: `${metrics.prefix}_llm_requests_total`,
    help: "Calls to the model provider (a JSON answer or a whole stream), by outcome: ok, error (an error answer, a broken or oversized answer, no connection), rate_limited (its 429), timeout, cancelled (our caller went away).",
    labelNames: ["outcome"] as const,
    registers,
  });
  const duration = new Histogram({
    name: `${metrics.prefix}_llm_request_duration_seconds`,
    help: "Time from calling the model provider to its whole answer (a stream's end), by outcome.",
    labelNames: ["outcome"] as const,
    buckets: [...LATENCY_BUCKETS, 30, 60, 120],
    registers,
  });
  const tokens = new Counter({
    name: `${metrics.prefix}_llm_tokens_total`,
    help: "Tokens of completed model calls, as the provider counted them (else estimated), by kind: input or output.",
    labelNames: ["kind"] as const,
    registers,
  });
  const overruns = new Counter({
    name: `${metrics.prefix}_llm_output_overruns_total`,
    help: "Model calls whose provider went past the output cap it was sent (it ignored max_tokens): the answer was cut at the cap and charged at most what was reserved.",
    registers,
  });
  const overrunTokens = new Counter({
    name: `${metrics.prefix}_llm_output_overrun_tokens_total`,
    help: "Output tokens providers produced past the cap they were sent, as far as they were read before the cut (a JSON answer: as the provider reported them); never charged.",
    registers,
  });
  for (const outcome of PROVIDER_OUTCOMES) requests.inc({ outcome }, 0);
  for (const kind of ["input", "output"]) tokens.inc({ kind }, 0);
  return {
    record(outcome: Outcome, seconds: number, completion?: Pick<Completion, "usage" | "overrun">) {
      requests.inc({ outcome });
      duration.observe({ outcome }, seconds);
      if (completion) {
        tokens.inc({ kind: "input" }, completion.usage.input_tokens);
        tokens.inc({ kind: "output" }, completion.usage.output_tokens);
      }
      if (completion?.overrun) {
        overruns.inc();
        overrunTokens.inc(completion.overrun);
      }
    },
  };
}

export type ProviderMetrics = ReturnType<typeof createProviderMetrics>;

/** The provider, with every call counted and timed as it ends (a stream when it ends, however it ends). */
export class MeteredProvider extends ChatProvider {
  private readonly metrics: ProviderMetrics;

  constructor(options: ProviderOptions, metrics: ProviderMetrics) {
    super(options);
    this.metrics = metrics;
  }

  override async complete(
    ...args: Parameters<ChatProvider["complete"]>
  ): ReturnType<ChatProvider["complete"]> {
    const started = performance.now();
    try {
      const completion = await super.complete(...args);
      this.record("ok", started, completion);
      return completion;
    } catch (err) {
      this.failed(err, args[1], started);
      throw err;
    }
  }

  override async *stream(...args: Parameters<ChatProvider["stream"]>): ReturnType<ChatProvider["stream"]> {
    const started = performance.now();
    let ended = false;
    try {
      const completion = yield* super.stream(...args);
      ended = true;
      this.record("ok", started, completion);
      return completion;
    } catch (err) {
      ended = true;
      this.failed(err, args[1], started);
      throw err;
    } finally {
      // Our caller stopped reading (its client went away) before the stream ended.
      if (!ended) this.record("cancelled", started);
    }
  }

  private failed(err: unknown, signal: AbortSignal, started: number): void {
    if (err instanceof ProviderNotConfigured) return; // no call was made
    this.record(outcomeOf(err, signal), started);
  }

  private record(outcome: Outcome, started: number, completion?: Completion): void {
    this.metrics.record(outcome, (performance.now() - started) / 1000, completion);
  }
}

function outcomeOf(err: unknown, signal: AbortSignal): Outcome {
  if (signal.aborted) return "cancelled";
  if (err instanceof ProviderRateLimited) return "rate_limited";
  if (err instanceof ProviderTimeout) return "timeout";
  return "error";
}
