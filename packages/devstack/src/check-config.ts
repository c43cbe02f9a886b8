/**
 * `pnpm check:config`: the deployment files and the README agree with the
 * configuration schemas. Every variable a process reads is documented in the
 * README, and every variable that `deploy/` sets is one some process reads
 * (a typo there would silently fall back to a default).
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { gatewayConfigSchema } from "@gw/gateway";
import { serviceConfigSchema } from "@gw/service";
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import { REPO_ROOT } from "./node-process.ts";

/** Variables read by `pnpm start` itself and by `pnpm keys`, beside the processes' schemas. */
export const DEVSTACK_VARIABLES = ["SERVICE_PORT", "LOCAL_REDIS_PORT", "DATA_DIR"];

const shapeOf = (schema: z.ZodType) => Object.keys((schema as unknown as { in: z.ZodObject }).in.shape);

export function knownVariables(): Set<string> {
  return new Set([...shapeOf(gatewayConfigSchema), ...shapeOf(serviceConfigSchema), ...DEVSTACK_VARIABLES]);
}

/** Variables without a row (`| \`NAME\` |`) in the README's configuration tables. */
export function undocumented(readme: string, known: Iterable<string>): string[] {
  return [...known]
    .filter((name) => !readme.includes(`| \`${name}\` |`))
    .map((name) => `README.md: ${name} is not documented`);
}

/** Environment variable names a deployment file sets: compose `environment`, Kubernetes `env`, Dockerfile `ENV`. */
export function variablesSetIn(path: string, text: string): string[] {
  if (/Dockerfile$/.test(path)) {
    return [...text.matchAll(/^ENV\s+(.+)$/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/([A-Z_][A-Z0-9_]*)=/g)].map((v) => v[1]!),
    );
  }
  const names: string[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]!.message}`);
    collect(doc.toJS(), names);
  }
  return names;
}

function collect(node: unknown, names: string[]): void {
  if (Array.isArray(node)) {
    for (const item of node) collect(item, names);
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if (key === "environment" && value && typeof value === "object" && !Array.isArray(value)) {
      names.push(...Object.keys(value));
    } else if (key === "env" && Array.isArray(value)) {
      for (const item of value) if (typeof item?.name === "string") names.push(item.name);
    } else {
      collect(value, names);
    }
  }
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
];

export async function checkRepository(root = REPO_ROOT): Promise<string[]> {
  const known = knownVariables();
  const problems = undocumented(await readFile(resolve(root, "README.md"), "utf8"), known);
  for (const path of DEPLOY_FILES) {
    problems.push(...unknownIn(path, await readFile(resolve(root, path), "utf8"), known));
  }
  return problems;
}

if (import.meta.main) {
  const problems = await checkRepository();
  for (const problem of problems) process.stderr.write(`${problem}\n`);
  process.stdout.write(
    problems.length === 0 ? "config check: ok\n" : `config check: ${problems.length} problem(s)\n`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
