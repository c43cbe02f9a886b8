import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Catalogue, CatalogueModel, Deployment, ModelMode, ProviderKind } from "./catalogue.ts";
import type { CallRoute, ChatRequest, Completion, ServedBy, ToolCallDelta } from "./chat.ts";
import { type Cooldowns, type DeploymentState, READY } from "./cooldowns.ts";
import type { EmbeddingRequest, Embeddings } from "./embeddings.ts";
import {
  ModelUnavailable,
  ProviderError,
  ProviderNotConfigured,
  ProviderRateLimited,
  ProviderTimeout,
  RETRY_AFTER,
} from "./errors.ts";
import { fieldNotTaken, providerFieldsOf, refuseUntakenFields } from "./fields.ts";
import type { AdapterFactory, AdapterOptions, ChatProvider, ModelProvider, StreamSeen } from "./provider.ts";
import type { OrganizationProviderKey, OrganizationProviderKeys } from "./provider-keys.ts";
import { followAbort } from "./transport.ts";

/**
 * Routes each model call across the deployments of its name and then its
 * fallbacks (docs/adr/0019-routing-and-shared-cooldowns.md):
 * - a deployment is chosen by weight among those of the best (lowest)
 *   priority that are neither cooling down nor already tried by this call
 *   (a probe is claimed first for one on probation);
 * - an attempt that fails before the first byte reached the client
 *   (connection refused or reset, timeout, 408, 409, 429, 5xx) is retried on
 *   another deployment, after an exponential backoff with full jitter, up to
 *   the catalogue's `retries`; the fallbacks' deployments come once none of
 *   the name's is left; every attempt falls within the call's one deadline;
 * - a caller's own fault (another 4xx), a stream that already reached the
 *   client, or a caller gone away is never retried;
 * - such failures count against the deployment in the shared cooldown state
 *   (cooldowns.ts), and a provider's `Retry-After` cools it down at once, for
 *   as long as it asks up to a cap;
 * - when nothing is left, the last provider error is the call's.
 * Time comes from the injected clock and chance from the injected `random`.
 */

export interface RouterSettings {
  /** The call's one deadline: every attempt and pause until the answer begins (a JSON answer: until it is read). */
  deadlineMs: number;
  /** The first retry's pause at most, doubled for each retry after it (full jitter). */
  backoffMs: number;
  /** The longest cooldown a provider's `Retry-After` starts. */
  retryAfterMaxMs: number;
}

/** How an attempt ended: `ok`, or the class of its failure. */
export const ATTEMPT_OUTCOMES = [
  "ok",
  "timeout",
  "connection",
  "rate_limited",
  "server_error",
  "conflict",
  "client_error",
  "broken",
  "cancelled",
] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** Failures worth another deployment: the provider's, not the caller's. */
const RETRYABLE = new Set<AttemptOutcome>([
  "timeout",
  "connection",
  "rate_limited",
  "server_error",
  "conflict",
]);

/** How a whole routed call ended, as `service_llm_requests_total` counts it. */
export type CallOutcome = "ok" | "error" | "rate_limited" | "timeout" | "cancelled";

/** What the router reports (provider-metrics.ts). */
export interface RouterMetrics {
  attempt(deployment: Deployment, outcome: AttemptOutcome, seconds: number, retry: boolean): void;
  served(deployment: Deployment, completion: Pick<Completion, "usage" | "usageDetails">): void;
  fallback(model: string, fallback: string): void;
  cooldownStarted(deployment: Deployment): void;
  cooldownStoreFailed(): void;
  call(outcome: CallOutcome, seconds: number, completion?: Pick<Completion, "usage" | "overrun">): void;
}

export interface RouterDeps {
  catalogue: Catalogue;
  adapters: Readonly<Record<ProviderKind, AdapterFactory | undefined>>;
  adapterOptions: AdapterOptions;
  cooldowns: Cooldowns;
  clock: Clock;
  /** A number in [0, 1): the weighted choice and the backoff's jitter. */
  random: () => number;
  settings: RouterSettings;
  metrics?: RouterMetrics | undefined;
  /** Organizations' own provider keys; none: `byok` deployments are never used. */
  providerKeys?: OrganizationProviderKeys | undefined;
  logger?: Logger | undefined;
}

/**
 * The deployment to try: by weight among the available deployments of the
 * best priority. `undefined` when none is available.
 */
export function pickDeployment(
  deployments: readonly Deployment[],
  available: (deployment: Deployment) => boolean,
  random: () => number,
): Deployment | undefined {
  let best = Number.POSITIVE_INFINITY;
  let total = 0;
  for (const d of deployments) {
    if (!available(d)) continue;
    if (d.priority < best) {
      best = d.priority;
      total = 0;
    }
    if (d.priority === best) total += d.weight;
  }
  if (total === 0) return undefined;
  let left = random() * total;
  let chosen: Deployment | undefined;
  for (const d of deployments) {
    if (d.priority !== best || !available(d)) continue;
    chosen = d;
    left -= d.weight;
    if (left < 0) break;
  }
  return chosen;
}

/** The class of an attempt's failure. */
export function outcomeOf(err: unknown): AttemptOutcome {
  if (err instanceof ProviderTimeout) return "timeout";
  if (err instanceof ProviderRateLimited) return "rate_limited";
  if (!(err instanceof ProviderError)) return "broken";
  const status = err.providerStatus;
  if (status === undefined) return err.code === "bad_gateway" ? "connection" : "broken";
  if (status === 408 || status === 409) return "conflict";
  if (status >= 500) return "server_error";
  if (status >= 400) return "client_error";
  return "broken"; // a 2xx whose answer could not be used
}

/** What routing reads of a call, whatever its kind (chat, embeddings). */
interface RoutedCall {
  model: string;
  route?: CallRoute | undefined;
}

interface Attempt<R extends RoutedCall> {
  deployment: Deployment;
  /** The catalogue name being tried (the one asked for, or a fallback). */
  name: string;
  model: CatalogueModel;
  provider: ModelProvider;
  request: R;
  signal: AbortSignal;
  probe: boolean;
  retry: boolean;
  byok: boolean;
  started: number;
}

export class ModelRouter implements ChatProvider {
  private readonly deps: RouterDeps;
  private readonly providers = new Map<string, ModelProvider>();
  /** Whether each provider kind's adapter has an embeddings API. */
  private readonly embedding = new Map<ProviderKind, boolean>();

  constructor(deps: RouterDeps) {
    this.deps = deps;
  }

  get catalogue(): Catalogue {
    return this.deps.catalogue;
  }

  resolveModel(requested: string): string | undefined {
    const { catalogue } = this.deps;
    if (requested === "auto") {
      if (!catalogue.defaultModel) throw new ProviderNotConfigured("LLM_DEFAULT_MODEL");
      return catalogue.defaultModel;
    }
    return catalogue.get(requested) ? requested : undefined;
  }

  get allowedModels(): readonly string[] | undefined {
    return this.deps.catalogue.closed ? this.deps.catalogue.names : undefined;
  }

  get defaultModel(): string | undefined {
    return this.deps.catalogue.defaultModel;
  }

  assertConfigured(): void {
    if (!this.deps.catalogue.configured) throw new ProviderNotConfigured("MODELS_FILE or LLM_BASE_URL");
  }

  reachable(model: string, allowed: readonly string[] | undefined): string[] {
    return this.deps.catalogue.reachable(model, allowed);
  }

  ownedBy(model: string): string {
    return this.deps.catalogue.ownedBy(model);
  }

  modeOf(model: string): ModelMode | undefined {
    return this.deps.catalogue.modeOf(model);
  }

  assertTakes(request: ChatRequest): void {
    if (providerFieldsOf(request).length === 0) return;
    const kinds = [request.model, ...(request.route?.fallbacks ?? [])].flatMap(
      (name) => this.deps.catalogue.get(name)?.deployments.map((d) => d.provider) ?? [],
    );
    refuseUntakenFields(request.model, kinds, request);
  }

  canEmbed(names: readonly string[]): boolean {
    return names.some((name) => this.deps.catalogue.get(name)?.deployments.some((d) => this.embeds(d)));
  }

  /**
   * An embeddings call, routed as a JSON chat call is (retries, fallbacks,
   * cooldowns, one deadline), over the deployments whose provider kind has
   * an embeddings API only: the others are passed over as if absent.
   */
  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    this.assertConfigured();
    const started = this.deps.clock.now();
    const route = new Route(this, this.deps, request, signal, (d) => this.embeds(d));
    try {
      for (;;) {
        const attempt = await route.next();
        const embed = attempt.provider.embed;
        let embeddings: Embeddings;
        try {
          if (!embed)
            throw new ProviderNotConfigured(`an embeddings adapter for ${attempt.deployment.provider}`);
          embeddings = await embed.call(attempt.provider, attempt.request, attempt.signal);
        } catch (err) {
          await route.failed(attempt, err);
          continue;
        }
        await route.attemptSucceeded(attempt);
        const served = { ...embeddings, servedBy: route.servedBy(attempt) };
        const used = usedBy(embeddings);
        this.deps.metrics?.served(attempt.deployment, used);
        this.deps.metrics?.call("ok", this.seconds(started), used);
        return served;
      }
    } catch (err) {
      this.deps.metrics?.call(callOutcomeOf(err, signal), this.seconds(started));
      throw err;
    } finally {
      route.close();
    }
  }

  /** Whether `deployment`'s provider kind has an embeddings API (its adapter has `embed`). */
  private embeds(deployment: Deployment): boolean {
    let known = this.embedding.get(deployment.provider);
    if (known === undefined) {
      const factory = this.deps.adapters[deployment.provider];
      known = typeof factory?.(deployment, this.deps.adapterOptions).embed === "function";
      this.embedding.set(deployment.provider, known);
    }
    return known;
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    this.assertConfigured();
    const started = this.deps.clock.now();
    const route = new Route<ChatRequest>(this, this.deps, request, signal, takes(request));
    try {
      for (;;) {
        const attempt = await route.next();
        let completion: Completion;
        try {
          completion = await attempt.provider.complete(attempt.request, attempt.signal);
        } catch (err) {
          await route.failed(attempt, err);
          continue;
        }
        const served = await route.succeeded(attempt, completion);
        this.deps.metrics?.call("ok", this.seconds(started), served);
        return served;
      }
    } catch (err) {
      this.deps.metrics?.call(callOutcomeOf(err, signal), this.seconds(started));
      throw err;
    } finally {
      route.close();
    }
  }

  async *stream(
    request: ChatRequest,
    signal: AbortSignal,
    seen: StreamSeen = {},
  ): AsyncGenerator<string | ToolCallDelta, Completion> {
    this.assertConfigured();
    const started = this.deps.clock.now();
    const route = new Route<ChatRequest>(this, this.deps, request, signal, takes(request));
    let ended = false;
    // The attempt whose stream reached the reader: let go of it however our reader stops.
    let reading: AsyncGenerator<string | ToolCallDelta, Completion> | undefined;
    try {
      for (;;) {
        const attempt = await route.next();
        const attemptSeen: { model?: string } = {};
        const pieces = attempt.provider.stream(attempt.request, attempt.signal, attemptSeen);
        let first: IteratorResult<string | ToolCallDelta, Completion>;
        try {
          first = await pieces.next();
        } catch (err) {
          await route.failed(attempt, err);
          continue;
        }
        // From here on the answer reaches the client: no other deployment is tried.
        route.committed();
        reading = pieces;
        if (attemptSeen.model !== undefined) seen.model = attemptSeen.model;
        seen.servedBy = route.servedBy(attempt);
        let completion: Completion;
        if (first.done) completion = first.value;
        else {
          yield first.value;
          try {
            completion = yield* pieces;
          } catch (err) {
            await route.broke(attempt, err);
            throw err;
          }
        }
        const served = await route.succeeded(attempt, completion);
        ended = true;
        this.deps.metrics?.call("ok", this.seconds(started), served);
        return served;
      }
    } catch (err) {
      ended = true;
      this.deps.metrics?.call(callOutcomeOf(err, signal), this.seconds(started));
      throw err;
    } finally {
      route.close();
      // Our caller stopped reading (its client went away) before the stream ended.
      if (!ended) {
        this.deps.metrics?.call("cancelled", this.seconds(started));
        await reading?.return(undefined as never).catch(() => undefined);
      }
    }
  }

  /**
   * The adapter of `deployment` (one per deployment). An organization's own
   * key makes one for the call: its key, and where it named a base URL, that
   * URL reached only through the key's own dispatcher (which checks where
   * each connection goes).
   */
  providerOf(deployment: Deployment, key: OrganizationProviderKey | undefined) {
    const factory = this.deps.adapters[deployment.provider];
    if (!factory) throw new ProviderNotConfigured(`an adapter for provider ${deployment.provider}`);
    if (key)
      return factory(
        { ...deployment, apiKey: key.apiKey, baseUrl: key.endpoint?.baseUrl ?? deployment.baseUrl },
        { ...this.deps.adapterOptions, dispatcher: key.endpoint?.dispatcher },
      );
    // One per deployment (the open shorthand's serves every name: an adapter sends the request's model).
    let provider = this.providers.get(deployment.id);
    if (!provider) {
      provider = factory(deployment, this.deps.adapterOptions);
      this.providers.set(deployment.id, provider);
    }
    return provider;
  }

  private seconds(started: number): number {
    return (this.deps.clock.now() - started) / 1000;
  }
}

/** The deployments a chat call can use: those whose provider kind takes every field it sets (llm/fields.ts). */
function takes(request: ChatRequest): ((deployment: Deployment) => boolean) | undefined {
  if (providerFieldsOf(request).length === 0) return undefined;
  return (deployment) => fieldNotTaken(deployment.provider, request) === undefined;
}

/** What an embeddings call used, as the metrics count a completion's: its input tokens as reported. */
function usedBy(embeddings: Embeddings): Pick<Completion, "usage" | "usageDetails"> {
  const input = embeddings.inputTokens ?? 0;
  return {
    usage: { input_tokens: input, output_tokens: 0, total_tokens: input },
    usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
  };
}

function callOutcomeOf(err: unknown, signal: AbortSignal): CallOutcome {
  if (signal.aborted) return "cancelled";
  if (err instanceof ProviderRateLimited) return "rate_limited";
  if (err instanceof ProviderTimeout) return "timeout";
  return "error";
}

/** One call's way through the catalogue: which names and deployments are left, and its deadline. */
class Route<R extends RoutedCall> {
  private readonly router: ModelRouter;
  private readonly deps: RouterDeps;
  private readonly request: R;
  private readonly signal: AbortSignal;
  /** The deployments this kind of call can use at all (an embeddings call: those with an embeddings API). */
  private readonly accepts: (deployment: Deployment) => boolean;
  private readonly names: readonly string[];
  private readonly deadline: number;
  /** Aborted when the call's signal aborts or its deadline passes: every attempt's signal. */
  private readonly attempt = new AbortController();
  /** The call's deadline passed. */
  private expired = false;
  private readonly unfollow: () => void;
  private cancelDeadline: (() => void) | undefined;
  private nameIndex = 0;
  private model: CatalogueModel | undefined;
  private states: DeploymentState[] = [];
  /** Deployments this call tried, or found it cannot use. */
  private readonly skipped = new Set<string>();
  /** Organizations' keys looked up by this call, by provider kind. */
  private readonly keys = new Map<ProviderKind, OrganizationProviderKey | undefined>();
  private attempts = 0;
  private lastError: unknown;
  /** When the first deployment found cooling comes back, in ms from now. */
  private soonestBackMs: number | undefined;

  constructor(
    router: ModelRouter,
    deps: RouterDeps,
    request: R,
    signal: AbortSignal,
    accepts: (deployment: Deployment) => boolean = () => true,
  ) {
    this.router = router;
    this.deps = deps;
    this.request = request;
    this.signal = signal;
    this.accepts = accepts;
    this.names = [request.model, ...(request.route?.fallbacks ?? [])];
    this.deadline = deps.clock.now() + deps.settings.deadlineMs;
    this.cancelDeadline = deps.clock.schedule(deps.settings.deadlineMs, () => {
      this.expired = true;
      this.attempt.abort(new ProviderTimeout());
    });
    this.unfollow = followAbort(signal, this.attempt);
  }

  /** The next attempt, after its backoff; throws the call's error when nothing is left. */
  async next(): Promise<Attempt<R>> {
    const { deps } = this;
    if (this.signal.aborted) throw this.signal.reason;
    if (this.attempts > deps.catalogue.routing.retries) throw this.giveUp();
    for (; this.nameIndex < this.names.length; this.nameIndex++) {
      const name = this.names[this.nameIndex]!;
      if (this.model?.name !== name) {
        const model = deps.catalogue.get(name);
        if (!model) continue;
        this.model = model;
        this.states = model.canCool ? await this.readStates(model) : [];
      }
      const model = this.model;
      for (;;) {
        const deployment = pickDeployment(
          model.deployments,
          (d) => this.accepts(d) && !this.skipped.has(d.id) && this.stateOf(d).kind !== "cooling",
          deps.random,
        );
        if (!deployment) break;
        const key = deployment.byok ? await this.keyFor(deployment.provider) : undefined;
        if (deployment.byok && !key) {
          this.skipped.add(deployment.id);
          continue;
        }
        const probe = this.stateOf(deployment).kind === "probation";
        if (probe && !(await this.claimProbe(deployment))) {
          this.skipped.add(deployment.id);
          this.soonestBackMs = Math.min(this.soonestBackMs ?? 1_000, 1_000);
          continue;
        }
        const retry = this.attempts > 0;
        if (retry && !(await this.backoff())) {
          if (probe) await this.store(() => deps.cooldowns.releaseProbe(deployment, this.org));
          throw this.giveUp();
        }
        if (this.nameIndex > 0 && !this.triedFallback.has(name)) {
          this.triedFallback.add(name);
          deps.metrics?.fallback(this.request.model, name);
        }
        this.attempts++;
        return {
          deployment,
          name,
          model,
          provider: this.router.providerOf(deployment, key),
          request: { ...this.request, model: deployment.upstreamModel },
          signal: this.attempt.signal,
          probe,
          retry,
          byok: key !== undefined,
          started: deps.clock.now(),
        };
      }
    }
    throw this.giveUp();
  }

  private readonly triedFallback = new Set<string>();

  /** An attempt failed before anything reached the client: counted, then retried unless it must not be. */
  async failed(attempt: Attempt<R>, err: unknown): Promise<void> {
    const error = this.errorOf(err);
    const outcome = this.signal.aborted ? "cancelled" : outcomeOf(error);
    this.deps.metrics?.attempt(
      attempt.deployment,
      outcome,
      this.secondsSince(attempt.started),
      attempt.retry,
    );
    this.skipped.add(attempt.deployment.id);
    if (outcome === "cancelled") {
      if (attempt.probe)
        await this.store(() => this.deps.cooldowns.releaseProbe(attempt.deployment, this.org));
      throw err;
    }
    if (!RETRYABLE.has(outcome)) {
      // The deployment answered: a probe found it alive, whatever the caller did wrong.
      if (attempt.probe) await this.store(() => this.deps.cooldowns.recovered(attempt.deployment, this.org));
      throw error;
    }
    await this.countFailure(attempt, error);
    this.lastError = error;
    if (this.expired) throw error;
  }

  /**
   * A stream broke after it reached the client: counted against the deployment (`broken`, unless it went
   * silent, `timeout`, or our caller went away, `cancelled`), never retried.
   */
  async broke(attempt: Attempt<R>, err: unknown): Promise<void> {
    const outcome = this.signal.aborted ? "cancelled" : err instanceof ProviderTimeout ? "timeout" : "broken";
    this.deps.metrics?.attempt(
      attempt.deployment,
      outcome,
      this.secondsSince(attempt.started),
      attempt.retry,
    );
    if (outcome === "cancelled") {
      if (attempt.probe)
        await this.store(() => this.deps.cooldowns.releaseProbe(attempt.deployment, this.org));
      return;
    }
    if (outcome === "broken" || RETRYABLE.has(outcome)) await this.countFailure(attempt, err);
  }

  /** The answer is whole: the completion, with the deployment that served it. */
  async succeeded(attempt: Attempt<R>, completion: Completion): Promise<Completion> {
    await this.attemptSucceeded(attempt);
    const served = { ...completion, servedBy: this.servedBy(attempt) };
    this.deps.metrics?.served(attempt.deployment, served);
    return served;
  }

  /** The attempt answered: counted, and a probe's deployment is back. */
  async attemptSucceeded(attempt: Attempt<R>): Promise<void> {
    this.deps.metrics?.attempt(attempt.deployment, "ok", this.secondsSince(attempt.started), attempt.retry);
    if (attempt.probe) await this.store(() => this.deps.cooldowns.recovered(attempt.deployment, this.org));
  }

  servedBy(attempt: Attempt<R>): ServedBy {
    const { deployment } = attempt;
    return {
      model: attempt.name,
      deployment: deployment.id,
      provider: deployment.provider,
      upstreamModel: attempt.request.model,
      price: deployment.price,
      byok: attempt.byok,
    };
  }

  /** The answer began reaching the client: the deadline no longer applies (its stream's chunk timeouts do). */
  committed(): void {
    this.cancelDeadline?.();
    this.cancelDeadline = undefined;
  }

  close(): void {
    this.committed();
    this.unfollow();
  }

  /** The call's error once nothing is left: the last provider error, else why nothing could be tried. */
  private giveUp(): unknown {
    if (this.lastError !== undefined) return this.lastError;
    if (this.expired) return new ProviderTimeout();
    const seconds =
      this.soonestBackMs === undefined ? undefined : Math.max(1, Math.ceil(this.soonestBackMs / 1000));
    return new ModelUnavailable(this.request.model, seconds);
  }

  /** A deadline that passed shows as the provider's timeout, whatever the adapter made of its abort. */
  private errorOf(err: unknown): unknown {
    if (this.expired && !this.signal.aborted && !(err instanceof ProviderError)) return new ProviderTimeout();
    return err;
  }

  private stateOf(deployment: Deployment): DeploymentState {
    const state = this.states[deployment.index] ?? READY;
    if (state.kind === "cooling")
      this.soonestBackMs = Math.min(this.soonestBackMs ?? state.remainingMs, state.remainingMs);
    return state;
  }

  private async countFailure(attempt: Attempt<R>, error: unknown): Promise<void> {
    const { deployment, model } = attempt;
    if (!model.canCool) return;
    const { routing } = this.deps.catalogue;
    const coolMs = attempt.probe
      ? routing.cooldown.coolMs
      : error instanceof ProviderRateLimited
        ? this.retryAfterMs(error)
        : undefined;
    const started = await this.store(() =>
      this.deps.cooldowns.failed(deployment, routing.cooldown, coolMs, this.org),
    );
    if (started) this.deps.metrics?.cooldownStarted(deployment);
  }

  /** A provider's `Retry-After`, up to the cap, in ms; undefined when it sent none. */
  private retryAfterMs(error: ProviderRateLimited): number | undefined {
    const value = error.headers["Retry-After"];
    if (!value || !RETRY_AFTER.test(value)) return undefined;
    const ms = /^\d+$/.test(value) ? Number(value) * 1000 : Date.parse(value) - this.deps.clock.wall();
    if (!(ms > 0)) return undefined;
    return Math.min(ms, this.deps.settings.retryAfterMaxMs);
  }

  /** Waits before a retry; false when the pause would end past the deadline. */
  private async backoff(): Promise<boolean> {
    const { clock, random, settings } = this.deps;
    const ceiling = settings.backoffMs * 2 ** (this.attempts - 1);
    const pause = Math.floor(random() * ceiling);
    if (clock.now() + pause >= this.deadline) return false;
    if (pause === 0) return true;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        cancel();
        reject(this.signal.reason);
      };
      const cancel = clock.schedule(pause, () => {
        this.signal.removeEventListener("abort", onAbort);
        resolve();
      });
      this.signal.addEventListener("abort", onAbort, { once: true });
    });
    return true;
  }

  /** The calling organization: the state of a `byok` deployment is its own (`Cooldowns`). */
  private get org(): string | undefined {
    return this.request.route?.caller?.principal.org;
  }

  private async readStates(model: CatalogueModel): Promise<DeploymentState[]> {
    return (await this.store(() => this.deps.cooldowns.states(model, this.org))) ?? [];
  }

  private async claimProbe(deployment: Deployment): Promise<boolean> {
    const ttl = Math.max(1, Math.min(deployment.timeoutMs * 2, this.deadline - this.deps.clock.now()));
    return (await this.store(() => this.deps.cooldowns.claimProbe(deployment, ttl, this.org))) ?? true;
  }

  /**
   * The calling organization's own key for `provider`, looked up once per
   * call, right before the first attempt of a `byok` deployment of that kind
   * (the lookup is a use of the key, audited on its first: llm/provider-keys.ts).
   * None without a caller (a call outside the model-call pipeline) or a store.
   */
  private async keyFor(provider: ProviderKind): Promise<OrganizationProviderKey | undefined> {
    if (!this.keys.has(provider)) {
      const caller = this.request.route?.caller;
      const found =
        caller && this.deps.providerKeys ? await this.deps.providerKeys.keyFor(caller, provider) : undefined;
      this.keys.set(provider, found);
    }
    return this.keys.get(provider);
  }

  /**
   * The shared state is advice: when Redis cannot be asked, routing goes on
   * as if every deployment were ready (and counted in the metrics), rather
   * than failing calls a provider could answer.
   */
  private async store<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      this.deps.metrics?.cooldownStoreFailed();
      this.deps.logger?.warn(
        { err: (err as Error).message },
        "the shared cooldown state could not be read or written",
      );
      return undefined;
    }
  }

  private secondsSince(started: number): number {
    return (this.deps.clock.now() - started) / 1000;
  }
}
