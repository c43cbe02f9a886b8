import { readFileSync } from "node:fs";
import { DEVELOPMENT_EMBEDDING_MODELS } from "@gw/core/development-models";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { hasPriceDecimals, type ModelList, type ModelPrice } from "./prices.ts";

/**
 * The model catalogue: what a model name a caller asks for routes to. Each
 * name has deployments (a provider kind, its URL and credential, the
 * upstream's own model id, a weight and a priority, a price) and fallbacks
 * (other names tried when every deployment of this one failed), and the
 * catalogue has one routing policy (retries, cooldowns). It comes from
 * `MODELS_FILE` (docs/api/providers.md), or from the one-deployment
 * shorthand of `LLM_BASE_URL`, `LLM_API_KEY` and `LLM_MODELS`.
 */

export const PROVIDER_KINDS = ["openai", "azure", "anthropic"] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** One place a model name can be served from. */
export interface Deployment {
  /** `<model>#<position>` (`gpt-4o#0`): its name in metrics, logs, traces and the shared cooldown state. */
  id: string;
  /** The catalogue name it serves (`*` for the shorthand without `LLM_MODELS`, which serves any name). */
  modelName: string;
  /** Its position among the model's deployments. */
  index: number;
  provider: ProviderKind;
  baseUrl: string;
  /** The key it sends; undefined for a provider without one (a local vLLM) and for `byok`. */
  apiKey: string | undefined;
  /** The upstream's own model id (for `azure`, the deployment name in its URL). */
  upstreamModel: string;
  weight: number;
  priority: number;
  /** To the first byte, and between streamed chunks. */
  timeoutMs: number;
  /** USD per million tokens; undefined: unpriced (costs 0, and a key with a spend limit cannot reach it). */
  price: ModelPrice | undefined;
  /** Azure's `api-version`. */
  apiVersion: string | undefined;
  /** Served with the calling organization's own key for `provider`; skipped for an organization without one. */
  byok: boolean;
}

/** What a model name is for: chat (`/responses`, `/chat/completions`, evals) or `/embeddings`. */
export const MODEL_MODES = ["chat", "embedding"] as const;
export type ModelMode = (typeof MODEL_MODES)[number];

export interface CatalogueModel {
  name: string;
  /** What it is for; undefined: whatever a call asks of it (the provider refuses what it cannot do). */
  mode?: ModelMode | undefined;
  /** Other names tried, in order, once every deployment of this one failed or cools down. */
  fallbacks: readonly string[];
  deployments: readonly Deployment[];
  /**
   * Whether its deployments cool down: only where a call has somewhere else
   * to go (another deployment, a fallback). Cooling the one deployment of a
   * name would only turn its provider's errors into the gateway's.
   */
  canCool: boolean;
  /** Who `GET /models` says owns it: `development` for the development provider of `pnpm start`; default `gateway`. */
  ownedBy?: string | undefined;
}

/** Who `GET /models` says owns the models of the development provider that `pnpm start` runs. */
export const DEVELOPMENT_OWNER = "development";

/** What the catalogue says of retries and cooldowns. */
export interface RoutingPolicy {
  /** Further attempts after the first, across deployments and fallbacks. */
  retries: number;
  cooldown: {
    /** Failures within `windowMs` that start a cooldown. */
    failures: number;
    windowMs: number;
    /** How long a cooldown lasts (then one probe before traffic returns). */
    coolMs: number;
  };
}

export const DEFAULT_ROUTING: RoutingPolicy = {
  retries: 2,
  cooldown: { failures: 3, windowMs: 60_000, coolMs: 30_000 },
};

export class Catalogue {
  /** Names in the catalogue's order (the file's, or `LLM_DEFAULT_MODEL` then `LLM_MODELS`). */
  readonly names: readonly string[];
  /** The model of `auto`: `LLM_DEFAULT_MODEL`, else the first name. */
  readonly defaultModel: string | undefined;
  readonly routing: RoutingPolicy;
  /** Every deployment, each once. */
  readonly deployments: readonly Deployment[];
  private readonly models: ReadonlyMap<string, CatalogueModel>;
  /** The shorthand without `LLM_MODELS`: any name is served here, as the upstream's model id. */
  private readonly open: Deployment | undefined;
  private readonly openOwnedBy: string | undefined;

  constructor(options: {
    models: CatalogueModel[];
    defaultModel?: string | undefined;
    routing?: RoutingPolicy;
    open?: Deployment | undefined;
    /** Who owns the names the open deployment serves (`ownedBy`). */
    openOwnedBy?: string | undefined;
  }) {
    this.models = new Map(options.models.map((m) => [m.name, m]));
    this.names = options.models.map((m) => m.name);
    this.defaultModel = options.defaultModel ?? this.names[0];
    this.routing = options.routing ?? DEFAULT_ROUTING;
    this.open = options.open;
    this.openOwnedBy = options.openOwnedBy;
    this.deployments = [
      ...options.models.flatMap((m) => m.deployments),
      ...(options.open ? [options.open] : []),
    ];
  }

  /** Whether any name is served (an open catalogue serves every name). */
  get configured(): boolean {
    return this.open !== undefined || this.models.size > 0;
  }

  /** Whether only the names listed may be asked for (false: any name goes to the one open deployment). */
  get closed(): boolean {
    return this.open === undefined;
  }

  /** The model `name` routes to, if the catalogue serves it. */
  get(name: string): CatalogueModel | undefined {
    const listed = this.models.get(name);
    if (listed || !this.open) return listed;
    return {
      name,
      fallbacks: [],
      deployments: [{ ...this.open, upstreamModel: name }],
      canCool: false,
      ownedBy: this.openOwnedBy,
    };
  }

  /** What `name` is for, when the catalogue says (`mode`). */
  modeOf(name: string): ModelMode | undefined {
    return this.models.get(name)?.mode;
  }

  /** Who `GET /models` says owns `name`: `gateway` unless the catalogue says otherwise. */
  ownedBy(name: string): string {
    return this.get(name)?.ownedBy ?? "gateway";
  }

  /**
   * The names a call for `name` may reach, in the order tried: `name`, then
   * its fallbacks that `allowed` (a key's model allowlist; undefined: any)
   * lets it use. The key's allowlist applies to every fallback tried.
   */
  reachable(name: string, allowed: readonly string[] | undefined): string[] {
    const fallbacks = this.models.get(name)?.fallbacks ?? [];
    return [name, ...fallbacks.filter((f) => !allowed || allowed.includes(f))];
  }

  /**
   * The price to reserve at for a call that may reach `names`: each part the
   * highest among their deployments. Undefined when one of them has no price
   * (the call may be served for nothing, so a spend limit cannot hold it).
   */
  reservePrice(names: readonly string[]): ModelPrice | undefined {
    let highest: ModelPrice | undefined;
    for (const name of names) {
      for (const d of this.get(name)?.deployments ?? []) {
        if (!d.price) return undefined;
        highest = highest
          ? {
              input: Math.max(highest.input, d.price.input),
              cachedInput: Math.max(highest.cachedInput, d.price.cachedInput),
              output: Math.max(highest.output, d.price.output),
            }
          : d.price;
      }
    }
    return highest;
  }
}

// ---------------------------------------------------------------- the file

const price = z
  .number()
  .min(0)
  .max(1_000_000)
  .refine(hasPriceDecimals, { message: "dollars per million tokens, at most three decimals" });

const deploymentSchema = z
  .strictObject({
    provider: z.enum(PROVIDER_KINDS),
    base_url: z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, "")),
    api_key: z.string().min(1).optional(),
    model: z.string().min(1).max(256),
    weight: z.number().positive().max(1_000_000).default(1),
    priority: z.number().int().min(0).max(1_000).default(0),
    timeout_ms: z.number().int().positive().max(3_600_000).optional(),
    price: z.strictObject({ input: price, cached_input: price.optional(), output: price }).optional(),
    api_version: z.string().min(1).max(64).optional(),
    byok: z.boolean().default(false),
  })
  .superRefine((d, ctx) => {
    if (d.provider === "azure" && !d.api_version)
      ctx.addIssue({ code: "custom", path: ["api_version"], message: "required for provider azure" });
    if (d.provider !== "azure" && d.api_version)
      ctx.addIssue({ code: "custom", path: ["api_version"], message: "only provider azure takes one" });
    if (d.byok && d.api_key)
      ctx.addIssue({
        code: "custom",
        path: ["api_key"],
        message: "a byok deployment uses the calling organization's key: give it none",
      });
  });

const modelSchema = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(256)
    .refine((n) => n !== "auto" && n.isWellFormed() && !n.includes("\u0000"), {
      message: "not a model name: `auto` is the default's, and U+0000 or a lone surrogate cannot be stored",
    }),
  mode: z.enum(MODEL_MODES).optional(),
  fallbacks: z.array(z.string().min(1).max(256)).max(16).default([]),
  deployments: z.array(deploymentSchema).min(1).max(64),
});

const routingSchema = z.strictObject({
  retries: z.number().int().min(0).max(10).default(DEFAULT_ROUTING.retries),
  cooldown: z
    .strictObject({
      failures: z.number().int().min(1).max(1_000).default(DEFAULT_ROUTING.cooldown.failures),
      window_s: z
        .number()
        .int()
        .min(1)
        .max(86_400)
        .default(DEFAULT_ROUTING.cooldown.windowMs / 1000),
      seconds: z
        .number()
        .int()
        .min(1)
        .max(86_400)
        .default(DEFAULT_ROUTING.cooldown.coolMs / 1000),
    })
    .prefault({}),
});

const catalogueFileSchema = z.strictObject({
  models: z.array(modelSchema).min(1).max(1_000),
  routing: routingSchema.prefault({}),
});

/** A problem with the catalogue, as `MODELS_FILE`'s configuration error names it: the file and the field. */
export class CatalogueError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(problems.join("; "));
    this.name = "CatalogueError";
    this.problems = problems;
  }
}

/** `models[0].deployments[1].api_key`: where a problem is, as an operator finds it in the file. */
function fieldOf(path: readonly PropertyKey[]): string {
  return path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`))
    .join("");
}

export interface CatalogueEnvironment {
  /** Where `env:NAME` keys are read. */
  env: NodeJS.ProcessEnv;
  /** Literal keys are refused in production. */
  production: boolean;
  /** Deployments' timeout when they name none (`LLM_TIMEOUT_MS`). */
  defaultTimeoutMs: number;
  /** `LLM_DEFAULT_MODEL`: must be one of the names. */
  defaultModel: string | undefined;
  /** The provider kinds this build has an adapter for (`llm/adapters.ts`). */
  kinds: readonly ProviderKind[];
}

/**
 * Reads and checks `MODELS_FILE` (YAML, or JSON, which is YAML too): the
 * shape, every `env:NAME` key set, names unique, fallbacks naming models of
 * the catalogue. Throws a `CatalogueError` whose problems name the file and
 * the field.
 */
export function loadCatalogueFile(path: string, environment: CatalogueEnvironment): Catalogue {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CatalogueError([`${path}: cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`]);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new CatalogueError([`${path}: not YAML or JSON: ${(err as Error).message.split("\n")[0]}`]);
  }
  return catalogueOf(raw, environment, path);
}

/** The catalogue a file's parsed content describes (`loadCatalogueFile`), `source` naming it in problems. */
export function catalogueOf(raw: unknown, environment: CatalogueEnvironment, source: string): Catalogue {
  const parsed = catalogueFileSchema.safeParse(raw);
  if (!parsed.success)
    throw new CatalogueError(
      parsed.error.issues.map((i) => `${source}: ${fieldOf(i.path) || "(file)"}: ${i.message}`),
    );
  const file = parsed.data;
  const problems: string[] = [];
  const problem = (path: PropertyKey[], message: string) =>
    problems.push(`${source}: ${fieldOf(path)}: ${message}`);
  const names = new Set<string>();
  for (const [m, model] of file.models.entries()) {
    if (names.has(model.name)) problem(["models", m, "name"], `'${model.name}' is named twice`);
    names.add(model.name);
  }
  const models: CatalogueModel[] = file.models.map((model, m) => {
    for (const [f, fallback] of model.fallbacks.entries()) {
      if (!names.has(fallback))
        problem(["models", m, "fallbacks", f], `'${fallback}' is not a model of the file`);
      if (fallback === model.name) problem(["models", m, "fallbacks", f], "a model is not its own fallback");
    }
    const deployments = model.deployments.map((d, i): Deployment => {
      const at = ["models", m, "deployments", i];
      if (!environment.kinds.includes(d.provider))
        problem([...at, "provider"], `'${d.provider}' has no adapter in this build`);
      return {
        id: `${model.name}#${i}`,
        modelName: model.name,
        index: i,
        provider: d.provider,
        baseUrl: d.base_url,
        apiKey:
          d.api_key === undefined
            ? undefined
            : keyOf(d.api_key, environment, (msg) => problem([...at, "api_key"], msg)),
        upstreamModel: d.model,
        weight: d.weight,
        priority: d.priority,
        timeoutMs: d.timeout_ms ?? environment.defaultTimeoutMs,
        price: d.price
          ? {
              input: d.price.input,
              cachedInput: d.price.cached_input ?? d.price.input,
              output: d.price.output,
            }
          : undefined,
        apiVersion: d.api_version,
        byok: d.byok,
      };
    });
    return {
      name: model.name,
      mode: model.mode,
      fallbacks: model.fallbacks,
      deployments,
      canCool: deployments.length > 1 || model.fallbacks.length > 0,
    };
  });
  if (environment.defaultModel !== undefined && !names.has(environment.defaultModel))
    problems.push(`LLM_DEFAULT_MODEL: '${environment.defaultModel}' is not a model of ${source}`);
  if (problems.length > 0) throw new CatalogueError(problems);
  return new Catalogue({
    models,
    defaultModel: environment.defaultModel,
    routing: {
      retries: file.routing.retries,
      cooldown: {
        failures: file.routing.cooldown.failures,
        windowMs: file.routing.cooldown.window_s * 1000,
        coolMs: file.routing.cooldown.seconds * 1000,
      },
    },
  });
}

const ENV_REFERENCE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

/** `env:NAME`: the variable's value (it must be set); anything else is the key itself, refused in production. */
function keyOf(value: string, environment: CatalogueEnvironment, problem: (message: string) => void) {
  const reference = ENV_REFERENCE.exec(value);
  if (reference) {
    const set = environment.env[reference[1]!];
    if (!set) problem(`the variable ${reference[1]} is not set`);
    return set || undefined;
  }
  if (value.startsWith("env:"))
    problem("env: names a variable: letters, digits and _, not starting with a digit");
  else if (environment.production)
    problem("a key written in the file is refused in production (NODE_ENV=production): use env:NAME");
  return value;
}

/**
 * The one-deployment shorthand: `LLM_BASE_URL` (an OpenAI-compatible API)
 * with `LLM_API_KEY` serves `LLM_DEFAULT_MODEL` and each of `LLM_MODELS`,
 * priced as `LLM_MODELS` prices them; without `LLM_MODELS`, any name asked
 * for (sent as it is). No `LLM_BASE_URL`: an empty catalogue (model calls
 * answer 503). `development`: `LLM_BASE_URL` is the development provider
 * of `pnpm start` (`LLM_DEVELOPMENT_PROVIDER`), whose models say so.
 */
export function shorthandCatalogue(settings: {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  defaultModel: string | undefined;
  models: ModelList | undefined;
  timeoutMs: number;
  development?: boolean | undefined;
}): Catalogue {
  const { baseUrl } = settings;
  if (!baseUrl) return new Catalogue({ models: [], defaultModel: settings.defaultModel });
  const deployment = (name: string): Deployment => ({
    id: `${name}#0`,
    modelName: name,
    index: 0,
    provider: "openai",
    baseUrl,
    apiKey: settings.apiKey,
    upstreamModel: name,
    weight: 1,
    priority: 0,
    timeoutMs: settings.timeoutMs,
    price: settings.models?.prices.get(name),
    apiVersion: undefined,
    byok: false,
  });
  const ownedBy = settings.development ? DEVELOPMENT_OWNER : undefined;
  if (!settings.models)
    return new Catalogue({
      models: [],
      defaultModel: settings.defaultModel,
      open: deployment("*"),
      openOwnedBy: ownedBy,
    });
  const names = [
    ...new Set([settings.defaultModel, ...settings.models].filter((m): m is string => m !== undefined)),
  ];
  return new Catalogue({
    models: names.map((name) => ({
      name,
      // The development provider chats as some names and embeds as others, and answers 404 otherwise.
      ...(settings.development
        ? { mode: (DEVELOPMENT_EMBEDDING_MODELS as readonly string[]).includes(name) ? "embedding" : "chat" }
        : {}),
      fallbacks: [],
      deployments: [deployment(name)],
      canCool: false,
      ownedBy,
    })),
    defaultModel: settings.defaultModel,
  });
}
