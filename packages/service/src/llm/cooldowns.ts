import type { RedisClient } from "@gw/core/redis";
import type { CatalogueModel, Deployment, RoutingPolicy } from "./catalogue.ts";

/**
 * Where each deployment stands, shared by every replica: ready; cooling down
 * (its failures reached the policy's count within its window, or a provider's
 * `Retry-After` asked for a pause, or its probe failed); or on probation (its
 * cooldown ended: one call probes it, and traffic returns once that call
 * succeeds). See docs/adr/0019-routing-and-shared-cooldowns.md.
 */
export type DeploymentState =
  | { kind: "ready" }
  | { kind: "cooling"; remainingMs: number }
  | { kind: "probation" };

export const READY: DeploymentState = { kind: "ready" };

/**
 * Whose state it is: a deployment's, shared by every caller, except a `byok` one's, which calls with
 * each organization's own key: its failures (a rate limit, a key revoked) are that organization's
 * alone, so its state is kept per organization (`org`, the caller's), and never moves another
 * organization off its own key.
 */
export interface Cooldowns {
  /** The state of each deployment of `model`, by position, read at once, as `org` sees them. */
  states(model: CatalogueModel, org?: string): Promise<DeploymentState[]>;
  /**
   * A failure of `deployment` that counts against it. It cools down once
   * `policy.failures` of them fall within `policy.windowMs`, or at once for
   * `coolMs` when given (a failed probe, a provider's `Retry-After`). True
   * when this call started the cooldown (another replica's may have).
   */
  failed(
    deployment: Deployment,
    policy: RoutingPolicy["cooldown"],
    coolMs?: number,
    org?: string,
  ): Promise<boolean>;
  /** Claims the one probe of a deployment on probation, for `ttlMs` at most; false when another call has it. */
  claimProbe(deployment: Deployment, ttlMs: number, org?: string): Promise<boolean>;
  /** The deployment's probe was answered: probation ends, its failures are forgotten. */
  recovered(deployment: Deployment, org?: string): Promise<void>;
  /** Gives a probe claim back without a verdict (the caller went away). */
  releaseProbe(deployment: Deployment, org?: string): Promise<void>;
}

/**
 * KEYS: each deployment's cooldown key, then its probation key, in turn.
 * Returns, for each, the cooldown's milliseconds left (PTTL: negative when
 * none) and whether it is on probation.
 */
const STATES = `
local out = {}
for i = 1, #KEYS, 2 do
  out[#out + 1] = redis.call('PTTL', KEYS[i])
  out[#out + 1] = redis.call('EXISTS', KEYS[i + 1])
end
return out
`;

/**
 * KEYS: failures, cooldown, probation, probe. ARGV: failures that start a
 * cooldown, the window (ms), the cooldown (ms), 1 to start it at once, how
 * long probation waits for a probe (ms). Returns 1 when it started one.
 * A deployment already cooling counts nothing more: its cooldown ends when
 * it was set to, however many replicas saw it fail meanwhile.
 */
const FAILED = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local start = ARGV[4] == '1'
if not start then
  local n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  start = n >= tonumber(ARGV[1])
end
if not start then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
redis.call('DEL', KEYS[1], KEYS[4])
return 1
`;

/** How long a deployment whose cooldown ended waits on probation for a call to probe it, at most. */
const PROBATION_MS = 86_400_000;

type Scripted = RedisClient & {
  llmCooldownStates(...args: (string | number)[]): Promise<number[]>;
  llmCooldownFailed(...args: (string | number)[]): Promise<number>;
};

/**
 * Cooldowns in Redis, so every replica sees one state: each deployment's
 * keys share its model's hash tag (`{gpt-4o}`: one slot per model on a
 * Redis Cluster, and one script reads every deployment of a model); each
 * update is one script, and a cooldown's end is its key's expiry in Redis,
 * the same instant for every replica. Only models whose deployments can
 * cool (`CatalogueModel.canCool`) are ever read or written.
 */
export class RedisCooldowns implements Cooldowns {
  private readonly redis: Scripted;
  private readonly prefix: string;

  constructor(redis: RedisClient, prefix = "gw:llm:cooldown") {
    if (!("llmCooldownStates" in redis)) {
      redis.defineCommand("llmCooldownStates", { lua: STATES });
      redis.defineCommand("llmCooldownFailed", { numberOfKeys: 4, lua: FAILED });
    }
    this.redis = redis as Scripted;
    this.prefix = prefix;
  }

  private key(
    deployment: Pick<Deployment, "modelName" | "index" | "byok">,
    part: string,
    org?: string,
  ): string {
    const whose = deployment.byok ? `${deployment.index}@${encodeURIComponent(org ?? "")}` : deployment.index;
    return `${this.prefix}:{${encodeURIComponent(deployment.modelName)}}:${whose}:${part}`;
  }

  async states(model: CatalogueModel, org?: string): Promise<DeploymentState[]> {
    const keys = model.deployments.flatMap((d) => [this.key(d, "cool", org), this.key(d, "probation", org)]);
    const raw = await this.redis.llmCooldownStates(keys.length, ...keys);
    return model.deployments.map((_, i): DeploymentState => {
      const remainingMs = Number(raw[2 * i]);
      if (remainingMs > 0) return { kind: "cooling", remainingMs };
      return Number(raw[2 * i + 1]) === 1 ? { kind: "probation" } : READY;
    });
  }

  async failed(
    deployment: Deployment,
    policy: RoutingPolicy["cooldown"],
    coolMs?: number,
    org?: string,
  ): Promise<boolean> {
    const started = await this.redis.llmCooldownFailed(
      this.key(deployment, "failures", org),
      this.key(deployment, "cool", org),
      this.key(deployment, "probation", org),
      this.key(deployment, "probe", org),
      policy.failures,
      policy.windowMs,
      Math.max(1, Math.round(coolMs ?? policy.coolMs)),
      coolMs === undefined ? 0 : 1,
      PROBATION_MS,
    );
    return Number(started) === 1;
  }

  async claimProbe(deployment: Deployment, ttlMs: number, org?: string): Promise<boolean> {
    // Whole milliseconds: Redis refuses a fraction (the router's clock has them), and a refused
    // claim would let every call probe.
    const px = Math.max(1, Math.ceil(ttlMs));
    const claimed = await this.redis.set(this.key(deployment, "probe", org), "1", "PX", px, "NX");
    return claimed === "OK";
  }

  async recovered(deployment: Deployment, org?: string): Promise<void> {
    await this.redis.del(
      this.key(deployment, "probation", org),
      this.key(deployment, "probe", org),
      this.key(deployment, "failures", org),
    );
  }

  async releaseProbe(deployment: Deployment, org?: string): Promise<void> {
    await this.redis.del(this.key(deployment, "probe", org));
  }
}

/** No shared state: every deployment always ready (a router in a test, or a catalogue that never cools). */
export const NO_COOLDOWNS: Cooldowns = {
  states: async (model) => model.deployments.map(() => READY),
  failed: async () => false,
  claimProbe: async () => true,
  recovered: async () => undefined,
  releaseProbe: async () => undefined,
};
