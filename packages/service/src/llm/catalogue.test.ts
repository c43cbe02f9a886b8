import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "@gw/core/config";
import { RUN_TO_EXIT_TEST_TIMEOUT_MS, runToExit } from "@gw/test-kit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { serviceConfigSchema } from "../config.ts";
import { catalogueOf } from "./catalogue.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "gw-catalogue-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));
afterEach(() => {
  vi.unstubAllEnvs();
});

/** Writes `text` as a catalogue file of its own and loads the service's configuration with it. */
async function load(text: string, extra: Record<string, string> = {}, name = "models.yaml") {
  const path = join(dir, `${Math.random().toString(36).slice(2)}-${name}`);
  await writeFile(path, text);
  return { path, config: () => loadConfig(serviceConfigSchema, { MODELS_FILE: path, ...extra }) };
}

/** The configuration's problems, as the process prints them before it exits 78. */
function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("the configuration loaded");
}

const EXAMPLE = `
models:
  - name: gpt-4o
    fallbacks: [gpt-4o-mini]
    deployments:
      - provider: openai
        base_url: https://api.openai.com/v1/
        api_key: env:GW_TEST_OPENAI_KEY
        model: gpt-4o-2024-08-06
        weight: 3
        price: {input: 2.5, cached_input: 1.25, output: 10}
      - provider: azure
        base_url: https://example.openai.azure.com
        api_key: azure-literal-key
        api_version: 2024-10-21
        model: gpt-4o-eu
        priority: 1
        timeout_ms: 30000
  - name: gpt-4o-mini
    deployments:
      - {provider: openai, base_url: "http://127.0.0.1:9/v1", model: gpt-4o-mini}
routing:
  retries: 1
  cooldown: {failures: 5, window_s: 10, seconds: 20}
`;

describe("MODELS_FILE", () => {
  it("reads the issue's shape, with defaults, env: keys and the file's order", async () => {
    vi.stubEnv("GW_TEST_OPENAI_KEY", "sk-from-the-environment");
    const { config } = await load(EXAMPLE);
    const { catalogue } = config();
    expect(catalogue.names).toEqual(["gpt-4o", "gpt-4o-mini"]);
    expect(catalogue.defaultModel).toBe("gpt-4o");
    expect(catalogue.routing).toEqual({
      retries: 1,
      cooldown: { failures: 5, windowMs: 10_000, coolMs: 20_000 },
    });
    const model = catalogue.get("gpt-4o")!;
    expect(model.fallbacks).toEqual(["gpt-4o-mini"]);
    expect(model.canCool).toBe(true);
    expect(model.deployments).toEqual([
      expect.objectContaining({
        id: "gpt-4o#0",
        provider: "openai",
        baseUrl: "https://api.openai.com/v1",
        apiKey: "sk-from-the-environment",
        upstreamModel: "gpt-4o-2024-08-06",
        weight: 3,
        priority: 0,
        timeoutMs: 60_000,
        price: { input: 2.5, cachedInput: 1.25, output: 10 },
        byok: false,
      }),
      expect.objectContaining({
        id: "gpt-4o#1",
        provider: "azure",
        apiKey: "azure-literal-key",
        apiVersion: "2024-10-21",
        weight: 1,
        priority: 1,
        timeoutMs: 30_000,
        price: undefined,
      }),
    ]);
    // One unpriced deployment among those a call may reach: no price to reserve at.
    expect(catalogue.reservePrice(["gpt-4o-mini"])).toBeUndefined();
    expect(catalogue.get("gpt-4o-mini")!.canCool).toBe(false);
  });

  it("reads JSON as well, and LLM_DEFAULT_MODEL names `auto` among its names", async () => {
    const json = JSON.stringify({
      models: [
        { name: "a", deployments: [{ provider: "openai", base_url: "http://a.test/v1", model: "a1" }] },
        {
          name: "b",
          deployments: [
            { provider: "openai", base_url: "http://b.test/v1", model: "b1", price: { input: 1, output: 2 } },
          ],
        },
      ],
    });
    const { config } = await load(json, { LLM_DEFAULT_MODEL: "b" }, "models.json");
    const { catalogue } = config();
    expect(catalogue.defaultModel).toBe("b");
    expect(catalogue.routing.retries).toBe(2);
    expect(catalogue.reservePrice(["b"])).toEqual({ input: 1, cachedInput: 1, output: 2 });
  });

  it("reserves at the highest price of every deployment a call may reach, part by part", async () => {
    const { config } = await load(`
models:
  - name: m
    fallbacks: [f]
    deployments:
      - {provider: openai, base_url: "http://a.test", model: a, price: {input: 1, cached_input: 0.5, output: 8}}
      - {provider: openai, base_url: "http://b.test", model: b, price: {input: 3, cached_input: 0.1, output: 2}}
  - name: f
    deployments:
      - {provider: openai, base_url: "http://c.test", model: c, price: {input: 2, cached_input: 1, output: 4}}
`);
    const { catalogue } = config();
    expect(catalogue.reservePrice(["m"])).toEqual({ input: 3, cachedInput: 0.5, output: 8 });
    expect(catalogue.reservePrice(catalogue.reachable("m", undefined))).toEqual({
      input: 3,
      cachedInput: 1,
      output: 8,
    });
    // A key that may not use the fallback is reserved at its own model's prices only.
    expect(catalogue.reachable("m", ["m"])).toEqual(["m"]);
  });

  it.each([
    [
      "a field of the wrong type",
      "models:\n  - name: m\n    deployments:\n      - {provider: openai, base_url: http://a.test, model: a, weight: heavy}\n",
      /models\[0\]\.deployments\[0\]\.weight: /,
    ],
    [
      "an unknown provider",
      "models:\n  - name: m\n    deployments:\n      - {provider: bedrock, base_url: http://a.test, model: a}\n",
      /models\[0\]\.deployments\[0\]\.provider: /,
    ],
    [
      "a misspelt field",
      "models:\n  - name: m\n    deployments:\n      - {provider: openai, base_url: http://a.test, model: a, wieght: 2}\n",
      /models\[0\]\.deployments\[0\]: .*wieght/,
    ],
    [
      "azure without api_version",
      "models:\n  - name: m\n    deployments:\n      - {provider: azure, base_url: https://x.openai.azure.com, model: a}\n",
      /models\[0\]\.deployments\[0\]\.api_version: required for provider azure/,
    ],
    [
      "an env: key whose variable is not set",
      "models:\n  - name: m\n    deployments:\n      - {provider: openai, base_url: http://a.test, model: a, api_key: env:GW_TEST_UNSET_KEY}\n",
      /models\[0\]\.deployments\[0\]\.api_key: the variable GW_TEST_UNSET_KEY is not set/,
    ],
    [
      "a fallback that is not in the file",
      "models:\n  - name: m\n    fallbacks: [nowhere]\n    deployments:\n      - {provider: openai, base_url: http://a.test, model: a}\n",
      /models\[0\]\.fallbacks\[0\]: 'nowhere' is not a model of the file/,
    ],
    [
      "a name given twice",
      "models:\n  - name: m\n    deployments: [{provider: openai, base_url: http://a.test, model: a}]\n  - name: m\n    deployments: [{provider: openai, base_url: http://b.test, model: b}]\n",
      /models\[1\]\.name: 'm' is named twice/,
    ],
    [
      "a price with more than three decimals",
      "models:\n  - name: m\n    deployments: [{provider: openai, base_url: http://a.test, model: a, price: {input: 0.0001, output: 1}}]\n",
      /models\[0\]\.deployments\[0\]\.price\.input: /,
    ],
    ["text that is not YAML", "models: [\n", /not YAML or JSON/],
  ])("refuses %s, naming the file and the field", async (_, text, problem) => {
    const { path, config } = await load(text);
    const problems = problemsOf(config);
    expect(problems.length).toBeGreaterThan(0);
    for (const p of problems) expect(p.startsWith(`MODELS_FILE: ${path}: `)).toBe(true);
    expect(problems.join("\n")).toMatch(problem);
  });

  it("refuses a provider kind this build has no adapter for", () => {
    const raw = {
      models: [
        {
          name: "m",
          deployments: [{ provider: "azure", base_url: "https://x.test", model: "a", api_version: "v" }],
        },
      ],
    };
    const environment = { env: {}, production: false, defaultTimeoutMs: 1_000, defaultModel: undefined };
    expect(() => catalogueOf(raw, { ...environment, kinds: ["openai"] }, "f.yaml")).toThrow(
      "f.yaml: models[0].deployments[0].provider: 'azure' has no adapter in this build",
    );
    expect(catalogueOf(raw, { ...environment, kinds: ["openai", "azure"] }, "f.yaml").names).toEqual(["m"]);
  });

  it("reads what a model is for (mode: chat or embedding; unset: either), and refuses another mode", () => {
    const deployments = [{ provider: "openai", base_url: "https://x.test", model: "a" }];
    const environment = {
      env: {},
      production: false,
      defaultTimeoutMs: 1_000,
      defaultModel: undefined,
      kinds: ["openai"] as const,
    };
    const catalogue = catalogueOf(
      {
        models: [
          { name: "chat", mode: "chat", deployments },
          { name: "embed", mode: "embedding", deployments },
          { name: "either", deployments },
        ],
      },
      environment,
      "f.yaml",
    );
    expect(["chat", "embed", "either"].map((m) => catalogue.modeOf(m))).toEqual([
      "chat",
      "embedding",
      undefined,
    ]);
    expect(() =>
      catalogueOf({ models: [{ name: "m", mode: "image", deployments }] }, environment, "f.yaml"),
    ).toThrow(/^f\.yaml: models\[0\]\.mode: /);
  });

  it("refuses a key written in the file in production, and takes it otherwise", async () => {
    const text =
      "models:\n  - name: m\n    deployments: [{provider: openai, base_url: http://a.test, model: a, api_key: sk-literal}]\n";
    const { path, config } = await load(text);
    expect(config().catalogue.get("m")!.deployments[0]!.apiKey).toBe("sk-literal");
    vi.stubEnv("NODE_ENV", "production");
    expect(problemsOf(config)).toEqual([
      `MODELS_FILE: ${path}: models[0].deployments[0].api_key: a key written in the file is refused in production (NODE_ENV=production): use env:NAME`,
    ]);
  });

  it("refuses LLM_DEFAULT_MODEL outside the file, and the shorthand's variables beside it", async () => {
    const text =
      "models:\n  - name: m\n    deployments: [{provider: openai, base_url: http://a.test, model: a}]\n";
    const { path, config } = await load(text, { LLM_DEFAULT_MODEL: "other" });
    expect(problemsOf(config)).toEqual([`MODELS_FILE: LLM_DEFAULT_MODEL: 'other' is not a model of ${path}`]);
    const beside = await load(text, { LLM_BASE_URL: "http://a.test/v1", LLM_MODELS: "a" });
    expect(problemsOf(beside.config)).toEqual([
      "LLM_BASE_URL: MODELS_FILE is set: the catalogue names every deployment (set one or the other)",
      "LLM_MODELS: MODELS_FILE is set: the catalogue names every deployment (set one or the other)",
    ]);
  });

  it("names a file that cannot be read", () => {
    const missing = join(dir, "missing.yaml");
    expect(problemsOf(() => loadConfig(serviceConfigSchema, { MODELS_FILE: missing }))).toEqual([
      `MODELS_FILE: ${missing}: cannot be read (ENOENT)`,
    ]);
  });

  it(
    "stops the service at start with exit code 78, naming the file and the field",
    async () => {
      const { path } = await load(
        "models:\n  - name: m\n    deployments: [{provider: openai, base_url: http://a.test, model: a, priority: -1}]\n",
      );
      const { code, stderr } = await runToExit("packages/service/src/main.ts", {
        PATH: process.env.PATH,
        MODELS_FILE: path,
      });
      expect(code).toBe(78);
      expect(stderr).toContain(`MODELS_FILE: ${path}: models[0].deployments[0].priority:`);
    },
    RUN_TO_EXIT_TEST_TIMEOUT_MS,
  );
});

describe("the LLM_* shorthand", () => {
  it("is a catalogue of one deployment per name, priced by LLM_MODELS, with `auto` first", () => {
    const { catalogue } = loadConfig(serviceConfigSchema, {
      LLM_BASE_URL: "http://provider.test/v1",
      LLM_API_KEY: "sk-shorthand",
      LLM_DEFAULT_MODEL: "small",
      LLM_MODELS: "large=1/0.5/4,small",
    });
    expect(catalogue.names).toEqual(["small", "large"]);
    expect(catalogue.defaultModel).toBe("small");
    expect(catalogue.get("large")).toEqual({
      name: "large",
      fallbacks: [],
      canCool: false,
      deployments: [
        expect.objectContaining({
          id: "large#0",
          provider: "openai",
          baseUrl: "http://provider.test/v1",
          apiKey: "sk-shorthand",
          upstreamModel: "large",
          price: { input: 1, cachedInput: 0.5, output: 4 },
        }),
      ],
    });
    expect(catalogue.get("other")).toBeUndefined();
  });

  it("without LLM_MODELS serves any name as the upstream's own, from one deployment", () => {
    const { catalogue } = loadConfig(serviceConfigSchema, { LLM_BASE_URL: "http://provider.test/v1" });
    expect(catalogue.closed).toBe(false);
    expect(catalogue.get("anything")!.deployments).toEqual([
      expect.objectContaining({ id: "*#0", modelName: "*", upstreamModel: "anything" }),
    ]);
    // No LLM_BASE_URL: nothing is served.
    expect(loadConfig(serviceConfigSchema, {}).catalogue.configured).toBe(false);
  });

  it("with LLM_DEVELOPMENT_PROVIDER (pnpm start's echo) says its models are owned by development; otherwise, and a file's, by the gateway", async () => {
    const development = loadConfig(serviceConfigSchema, {
      LLM_BASE_URL: "http://127.0.0.1:8082/v1",
      LLM_MODELS: "echo",
      LLM_DEFAULT_MODEL: "echo",
      LLM_DEVELOPMENT_PROVIDER: "true",
    }).catalogue;
    expect(development.ownedBy("echo")).toBe("development");
    // Its embedding model embeds only, and the others chat only (it answers 404 to anything else).
    const both = loadConfig(serviceConfigSchema, {
      LLM_BASE_URL: "http://127.0.0.1:8082/v1",
      LLM_MODELS: "echo,text-embedding-3-small",
      LLM_DEVELOPMENT_PROVIDER: "true",
    }).catalogue;
    expect([both.modeOf("echo"), both.modeOf("text-embedding-3-small")]).toEqual(["chat", "embedding"]);
    const open = loadConfig(serviceConfigSchema, {
      LLM_BASE_URL: "http://127.0.0.1:8082/v1",
      LLM_DEVELOPMENT_PROVIDER: "true",
    }).catalogue;
    expect(open.ownedBy("anything")).toBe("development");
    const shorthand = loadConfig(serviceConfigSchema, {
      LLM_BASE_URL: "http://provider.test/v1",
      LLM_MODELS: "echo",
    }).catalogue;
    expect(shorthand.ownedBy("echo")).toBe("gateway");
    expect(shorthand.modeOf("echo")).toBeUndefined();
    vi.stubEnv("GW_TEST_OPENAI_KEY", "sk-from-env");
    const { config } = await load(EXAMPLE);
    expect(config().catalogue.ownedBy("gpt-4o")).toBe("gateway");
  });
});
