/**
 * `pnpm check:config`: the deployment files and the documentation agree with the
 * configuration schemas. Every variable a process reads is documented in
 * docs/configuration.md (generated from the schemas' comments, so it cannot
 * fall behind), every link of the documentation resolves, every file,
 * heading and setting a comment or document cites exists, and every variable
 * that `deploy/` sets is one some process reads
 * (a typo there would silently fall back to a default). The committed
 * OpenAPI document is what `pnpm openapi` writes now, and valid.
 */
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { v1 } from "@gw/core/authz";
import { createMetrics } from "@gw/core/metrics";
import {
  devstackConfigSchema,
  freePort,
  PROMETHEUS_CONFIG,
  prometheusInstalled,
  REPO_ROOT,
} from "@gw/devstack";
import { createGatewayMetrics, gatewayConfigSchema } from "@gw/gateway";
import {
  createBudgetMetrics,
  createEvalMetrics,
  createProviderMetrics,
  serviceConfigSchema,
} from "@gw/service";
import { runValidationFile, spicedbLocalConfigSchema, startSpiceDBLocal } from "@gw/spicedb-local";
import type { z } from "zod";
import { missingCitations } from "./check-citations.ts";
import {
  composeProblems,
  k8sClusterProblems,
  k8sContainerProblems,
  scrapeTargetProblems,
  shippedTests,
  unpinnedImages,
  yamlDocuments,
} from "./check-deploy.ts";
import { brokenDocLinks } from "./check-docs.ts";
import { configurationDocProblems } from "./config-docs.ts";
import { CONFIG_SECTIONS } from "./config-sections.ts";
import { moduleGraphProblems } from "./module-graph.ts";
import { openaiFieldDocProblems } from "./openai-fields.ts";
import { committedOpenApiProblems } from "./openapi.ts";
import { packageGraphProblems } from "./package-graph.ts";

const execFileAsync = promisify(execFile);

const shapeOf = (schema: z.ZodType) => {
  const object =
    schema instanceof Object && "shape" in schema ? schema : (schema as unknown as { in: z.ZodObject }).in;
  return Object.keys((object as z.ZodObject).shape);
};

export function knownVariables(): Set<string> {
  return new Set([
    ...shapeOf(gatewayConfigSchema),
    ...shapeOf(serviceConfigSchema),
    ...shapeOf(spicedbLocalConfigSchema),
    ...shapeOf(devstackConfigSchema),
  ]);
}

/** Images built from this repository: only their environment is ours to check. */
const OUR_IMAGE = /^llm-authz-gateway\//;

/**
 * Environment variable names a deployment file sets for this project's own
 * processes: compose services built from this repository, Kubernetes
 * containers running its images, Dockerfile `ENV`. Third-party containers
 * (Postgres, SpiceDB) have their own variables.
 */
export function variablesSetIn(path: string, text: string): string[] {
  if (/Dockerfile$/.test(path)) {
    return [...text.matchAll(/^ENV\s+(.+)$/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/([A-Z_][A-Z0-9_]*)=/g)].map((v) => v[1]!),
    );
  }
  const names: string[] = [];
  for (const js of yamlDocuments(path, text)) {
    for (const service of Object.values((js?.services as Record<string, Record<string, unknown>>) ?? {})) {
      if (service?.build && service.environment && typeof service.environment === "object") {
        names.push(...Object.keys(service.environment));
      }
    }
    collectContainers(js, names);
  }
  return names;
}

function collectContainers(node: unknown, names: string[]): void {
  if (Array.isArray(node)) {
    for (const item of node) collectContainers(item, names);
    return;
  }
  if (node === null || typeof node !== "object") return;
  const record = node as Record<string, unknown>;
  if (typeof record.image === "string" && OUR_IMAGE.test(record.image) && Array.isArray(record.env)) {
    for (const item of record.env) if (typeof item?.name === "string") names.push(item.name);
  }
  for (const value of Object.values(record)) collectContainers(value, names);
}

/** Problems with one deployment file; a service's own image variables (e.g. NODE_ENV) are allowed. */
export function unknownIn(path: string, text: string, known: Set<string>, allowed = ["NODE_ENV"]): string[] {
  return variablesSetIn(path, text)
    .filter((name) => !known.has(name) && !allowed.includes(name))
    .map((name) => `${path}: sets ${name}, which no process reads`);
}

export const DEPLOY_FILES = [
  "deploy/Dockerfile",
  "deploy/docker-compose.yml",
  "deploy/k8s/gateway.yaml",
  "deploy/k8s/service.yaml",
  "deploy/k8s/eval-worker.yaml",
  "deploy/k8s/spicedb.yaml",
  "deploy/k8s/secret.example.yaml",
];

/**
 * `spicedb/validation.yaml` holds on the real engine: what `zed validate`
 * checks, on machines where zed cannot be installed. A schema that does not
 * parse fails here too. The engine runs with its metrics on, so the names
 * of SpiceDB's own metrics that the validation's checks produced come back
 * too (dashboards and alerts may query them).
 */
export async function checkSpiceDB(root = REPO_ROOT): Promise<{ problems: string[]; metrics: Set<string> }> {
  const metricsPort = await freePort();
  const server = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey: "config-check",
    metricsPort,
  });
  const client = v1.NewClient(
    "config-check",
    server.endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
  try {
    const report = await runValidationFile(resolve(root, "spicedb/validation.yaml"), client);
    const exposition = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const metrics = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    return { problems: report.failures.map((f) => `spicedb/validation.yaml: ${f}`), metrics };
  } catch (err) {
    return { problems: [`spicedb/validation.yaml: ${(err as Error).message}`], metrics: new Set() };
  } finally {
    client.close();
    await server.close();
  }
}

/** Names of every metric the gateway and the service export. */
export async function exportedMetrics(): Promise<Set<string>> {
  const service = createMetrics("service");
  createEvalMetrics(service);
  createProviderMetrics(service);
  createBudgetMetrics(service);
  const registries = [createGatewayMetrics().registry, service.registry];
  const names = new Set<string>();
  for (const registry of registries) for (const m of await registry.getMetricsAsJSON()) names.add(m.name);
  return names;
}

/** Metric families dashboards and alerts query: ours, our dependencies' clients, SpiceDB's, Node's, `up`. */
const METRIC =
  /\b(?:(?:gateway|service|redis_client|grpc_client|grpc_server|spicedb|process|nodejs)_[a-z0-9_]+|up)\b(?=\s*[{[)]|\s*$)/g;

/** Metrics `expr` queries that nothing exports (a renamed metric leaves a blank panel or an alert that never fires). */
function unexported(expr: string, exported: Set<string>): string[] {
  return [...expr.matchAll(METRIC)]
    .map(([name]) => name)
    .filter(
      (name) =>
        name !== "up" && !exported.has(name) && !exported.has(name.replace(/_(bucket|sum|count)$/, "")),
    );
}

/** Metrics a Grafana dashboard queries that no process exports. */
export function unknownMetrics(path: string, dashboardJson: string, exported: Set<string>): string[] {
  const dashboard = JSON.parse(dashboardJson) as {
    panels?: { title?: string; targets?: { expr?: string }[] }[];
  };
  return (dashboard.panels ?? []).flatMap((panel) =>
    (panel.targets ?? []).flatMap((target) =>
      unexported(target.expr ?? "", exported).map(
        (name) => `${path}: panel "${panel.title}" queries ${name}, which nothing exports`,
      ),
    ),
  );
}

interface RuleFile {
  groups?: { rules?: { alert?: string; record?: string; expr?: string }[] }[];
}
interface RuleTests {
  rule_files?: string[];
  tests?: { alert_rule_test?: { alertname?: string }[] }[];
}

/**
 * Alert rules query only exported metrics, and each alert has a unit test
 * (`promtool test rules`) that names it.
 */
export function alertRuleProblems(
  rules: { path: string; text: string }[],
  tests: { path: string; text: string }[],
  exported: Set<string>,
): string[] {
  const tested = new Set(
    tests.flatMap(
      ({ path, text }) =>
        (yamlDocuments(path, text)[0] as RuleTests).tests?.flatMap((t) =>
          (t.alert_rule_test ?? []).map((a) => a.alertname),
        ) ?? [],
    ),
  );
  return rules.flatMap(({ path, text }) =>
    ((yamlDocuments(path, text)[0] as RuleFile).groups ?? []).flatMap((group) =>
      (group.rules ?? []).flatMap((rule) => [
        ...unexported(rule.expr ?? "", exported).map(
          (name) => `${path}: ${rule.alert ?? rule.record} queries ${name}, which nothing exports`,
        ),
        ...(rule.alert && !tested.has(rule.alert)
          ? [`${path}: alert ${rule.alert} has no promtool test`]
          : []),
      ]),
    ),
  );
}

/**
 * `promtool check config` (the configuration and the rule files it loads)
 * and `promtool test rules`; `skipped` says why when promtool is missing.
 */
export async function promtoolProblems(
  root = REPO_ROOT,
  testFiles?: string[],
): Promise<{ problems: string[]; skipped?: string }> {
  if (!(await prometheusInstalled("promtool")))
    return {
      problems: [],
      skipped: "promtool is missing (apt-get install -y prometheus): rules not checked",
    };
  const tests = testFiles ?? (await filesIn(root, PROMETHEUS_TESTS, ".yml"));
  const problems: string[] = [];
  for (const args of [
    ["check", "config", PROMETHEUS_CONFIG],
    ["test", "rules", ...tests],
  ]) {
    try {
      await execFileAsync("promtool", args, { cwd: root });
    } catch (err) {
      const { stdout = "", stderr = "" } = err as { stdout?: string; stderr?: string };
      problems.push(`promtool ${args.join(" ")}:\n${`${stdout}${stderr}`.trim()}`);
    }
  }
  return { problems };
}

export const DASHBOARDS = ["deploy/grafana/dashboards/gateway.json"];
export const PROMETHEUS_RULES = "deploy/prometheus/rules";
export const PROMETHEUS_TESTS = "deploy/prometheus/tests";

async function filesIn(root: string, dir: string, extension: string): Promise<string[]> {
  return (await readdir(resolve(root, dir)))
    .filter((name) => name.endsWith(extension))
    .sort()
    .map((name) => `${dir}/${name}`);
}

/** Every check, on the repository; `skipped` lists checks that could not run here. */
export async function checkRepository(root = REPO_ROOT): Promise<{ problems: string[]; skipped: string[] }> {
  const read = (path: string) => readFile(resolve(root, path), "utf8");
  const known = knownVariables();
  const problems = [
    ...(await configurationDocProblems(CONFIG_SECTIONS, root)),
    ...(await brokenDocLinks(root)),
    ...(await missingCitations(root, known)),
    ...(await packageGraphProblems(root)),
    ...(await moduleGraphProblems(root)),
  ];
  for (const path of DEPLOY_FILES) {
    const text = await read(path);
    problems.push(...unknownIn(path, text, known), ...unpinnedImages(path, text));
  }
  const dockerignore = await read(".dockerignore").catch(() => undefined);
  problems.push(...shippedTests("deploy/Dockerfile", await read("deploy/Dockerfile"), dockerignore));
  const compose = await read("deploy/docker-compose.yml");
  problems.push(...composeProblems("deploy/docker-compose.yml", compose));
  problems.push(...scrapeTargetProblems(PROMETHEUS_CONFIG, await read(PROMETHEUS_CONFIG), compose));
  const manifests = await Promise.all(
    (await filesIn(root, "deploy/k8s", ".yaml")).map(async (path) => ({
      path,
      docs: yamlDocuments(path, await read(path)),
    })),
  );
  for (const { path, docs } of manifests) problems.push(...k8sContainerProblems(path, docs));
  problems.push(...k8sClusterProblems(manifests));

  const spicedb = await checkSpiceDB(root);
  problems.push(...spicedb.problems);
  const exported = new Set([...(await exportedMetrics()), ...spicedb.metrics]);
  for (const path of DASHBOARDS) problems.push(...unknownMetrics(path, await read(path), exported));
  const load = async (dir: string) =>
    Promise.all((await filesIn(root, dir, ".yml")).map(async (path) => ({ path, text: await read(path) })));
  problems.push(...alertRuleProblems(await load(PROMETHEUS_RULES), await load(PROMETHEUS_TESTS), exported));
  const promtool = await promtoolProblems(root);
  problems.push(...promtool.problems);
  problems.push(...(await committedOpenApiProblems(root)));
  problems.push(...(await openaiFieldDocProblems(root)));
  return { problems, skipped: promtool.skipped ? [promtool.skipped] : [] };
}

if (import.meta.main) {
  const { problems, skipped } = await checkRepository();
  for (const reason of skipped) process.stderr.write(`skipped: ${reason}\n`);
  for (const problem of problems) process.stderr.write(`${problem}\n`);
  process.stdout.write(
    problems.length === 0 ? "config check: ok\n" : `config check: ${problems.length} problem(s)\n`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
