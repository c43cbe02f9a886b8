/**
 * `pnpm check:config`: the deployment files and the README agree with the
 * configuration schemas. Every variable a process reads is documented in the
 * README, and every variable that `deploy/` sets is one some process reads
 * (a typo there would silently fall back to a default).
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { createMetrics, v1 } from "@gw/core";
import { createGatewayMetrics, gatewayConfigSchema } from "@gw/gateway";
import { createEvalMetrics, serviceConfigSchema } from "@gw/service";
import { runValidationFile, spicedbLocalConfigSchema, startSpiceDBLocal } from "@gw/spicedb-local";
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import { REPO_ROOT } from "./node-process.ts";

/** Variables read by `pnpm start` itself and by `pnpm keys`, beside the processes' schemas. */
export const DEVSTACK_VARIABLES = ["SERVICE_PORT", "LOCAL_REDIS_PORT", "DATA_DIR"];

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
    ...DEVSTACK_VARIABLES,
  ]);
}

/** Variables without a row (`| \`NAME\` |`) in the README's configuration tables. */
export function undocumented(readme: string, known: Iterable<string>): string[] {
  return [...known]
    .filter((name) => !readme.includes(`| \`${name}\` |`))
    .map((name) => `README.md: ${name} is not documented`);
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
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]!.message}`);
    const js = doc.toJS() as Record<string, unknown> | null;
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
];

/**
 * `spicedb/validation.yaml` holds on the real engine: what `zed validate`
 * checks, on machines where zed cannot be installed. A schema that does not
 * parse fails here too.
 */
export async function checkSpiceDB(root = REPO_ROOT): Promise<string[]> {
  const server = await startSpiceDBLocal({ host: "127.0.0.1", port: 0, presharedKey: "config-check" });
  const client = v1.NewClient(
    "config-check",
    server.endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
  try {
    const report = await runValidationFile(resolve(root, "spicedb/validation.yaml"), client);
    return report.failures.map((f) => `spicedb/validation.yaml: ${f}`);
  } catch (err) {
    return [`spicedb/validation.yaml: ${(err as Error).message}`];
  } finally {
    client.close();
    await server.close();
  }
}

/** Names of every metric the gateway and the service export. */
export async function exportedMetrics(): Promise<Set<string>> {
  const service = createMetrics("service");
  createEvalMetrics(service);
  const registries = [createGatewayMetrics().registry, service.registry];
  const names = new Set<string>();
  for (const registry of registries) for (const m of await registry.getMetricsAsJSON()) names.add(m.name);
  return names;
}

/** Metrics a Grafana dashboard queries that no process exports (a renamed metric leaves a blank panel). */
export function unknownMetrics(path: string, dashboardJson: string, exported: Set<string>): string[] {
  const dashboard = JSON.parse(dashboardJson) as {
    panels?: { title?: string; targets?: { expr?: string }[] }[];
  };
  const problems: string[] = [];
  for (const panel of dashboard.panels ?? []) {
    for (const target of panel.targets ?? []) {
      for (const [name] of (target.expr ?? "").matchAll(/\b(?:gateway|service)_[a-z0-9_]+/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, "");
        if (!exported.has(name) && !exported.has(base))
          problems.push(`${path}: panel "${panel.title}" queries ${name}, which nothing exports`);
      }
    }
  }
  return problems;
}

export const DASHBOARDS = ["deploy/grafana/dashboards/gateway.json"];

export async function checkRepository(root = REPO_ROOT): Promise<string[]> {
  const known = knownVariables();
  const problems = undocumented(await readFile(resolve(root, "README.md"), "utf8"), known);
  for (const path of DEPLOY_FILES) {
    problems.push(...unknownIn(path, await readFile(resolve(root, path), "utf8"), known));
  }
  const exported = await exportedMetrics();
  for (const path of DASHBOARDS) {
    problems.push(...unknownMetrics(path, await readFile(resolve(root, path), "utf8"), exported));
  }
  return problems;
}

if (import.meta.main) {
  const problems = [...(await checkRepository()), ...(await checkSpiceDB())];
  for (const problem of problems) process.stderr.write(`${problem}\n`);
  process.stdout.write(
    problems.length === 0 ? "config check: ok\n" : `config check: ${problems.length} problem(s)\n`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
