import { readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { prometheusInstalled, REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";
import {
  alertRuleProblems,
  checkRepository,
  exportedMetrics,
  knownVariables,
  promtoolProblems,
  unknownIn,
  unknownMetrics,
} from "../src/check-config.ts";
import {
  composeProblems,
  isPinned,
  k8sClusterProblems,
  k8sContainerProblems,
  scrapeTargetProblems,
  shippedTests,
  unpinnedImages,
  yamlDocuments,
} from "../src/check-deploy.ts";
import { brokenDocLinks } from "../src/check-docs.ts";
import {
  COMMENT_SOURCES,
  CONFIGURATION_DOC,
  configurationDocProblems,
  renderConfiguration,
} from "../src/config-docs.ts";
import { CONFIG_SECTIONS } from "../src/config-sections.ts";

const fixture = (name: string) =>
  readFileSync(resolve(import.meta.dirname, "fixtures/config-check", name), "utf8");
const known = knownVariables();
const promtoolInstalled = await prometheusInstalled("promtool");
if (!promtoolInstalled)
  process.stderr.write(
    "SKIPPED the promtool tests: promtool is missing (apt-get install -y prometheus; .ci/run does)\n",
  );

describe("config check", () => {
  it("passes on the repository as it is", async () => {
    const { problems, skipped } = await checkRepository();
    expect(problems).toEqual([]);
    // promtool is the one check that may be missing on a machine; .ci/run installs it.
    if (skipped.length > 0) process.stderr.write(`config check skipped: ${skipped.join("; ")}\n`);
    // It runs the schema's validation in SpiceDB and promtool: longer than 30 s on a loaded machine.
  }, 120_000);

  it("knows the variables of both processes and of the dev stack", () => {
    for (const name of [
      "PORT",
      "REDIS_URL",
      "GATEWAY_BOOTSTRAP_ADMIN_KEY",
      "API_KEY_CACHE_TTL_MS",
      "LOCAL_REDIS_PORT",
      "LOCAL_POSTGRES_PORT",
      "DATABASE_URL",
      "RESPONSE_RETENTION",
    ]) {
      expect(known.has(name), name).toBe(true);
    }
  });

  it.each([
    ["compose-typo.yml", ["compose-typo.yml: sets REDIS_ULR, which no process reads"]],
    ["k8s-unknown.yaml", ["k8s-unknown.yaml: sets API_KEY_CACHE_TTL, which no process reads"]],
    ["Dockerfile", ["Dockerfile: sets LOGLEVEL, which no process reads"]],
  ])("flags an unknown variable in %s", (name, problems) => {
    expect(unknownIn(name, fixture(name), known)).toEqual(problems);
  });

  it("refuses a deployment file that is not valid YAML", () => {
    expect(() => unknownIn("broken.yaml", fixture("broken.yaml"), known)).toThrow(/broken\.yaml/);
  });

  it("flags docs/configuration.md when it is not what the schemas say, and a variable without a comment", async () => {
    const root = await mkdtemp(join(tmpdir(), "gw-config-doc-"));
    try {
      for (const path of COMMENT_SOURCES) {
        await mkdir(dirname(join(root, path)), { recursive: true });
        await cp(join(REPO_ROOT, path), join(root, path));
      }
      await mkdir(join(root, "docs"));
      await writeFile(join(root, CONFIGURATION_DOC), (await renderConfiguration(CONFIG_SECTIONS, root)).text);
      expect(await configurationDocProblems(CONFIG_SECTIONS, root)).toEqual([]);
      // A schema comment changed, the document not regenerated.
      const gatewayConfig = join(root, "packages/gateway/src/config.ts");
      await writeFile(
        gatewayConfig,
        (await readFile(gatewayConfig, "utf8")).replace("TCP port the gateway listens on.", "Port."),
      );
      expect(await configurationDocProblems(CONFIG_SECTIONS, root)).toEqual([
        "docs/configuration.md is not what the schemas say: run pnpm docs:config",
      ]);
      // A variable no file comments on.
      const spicedbConfig = join(root, "packages/spicedb-local/src/config.ts");
      await writeFile(
        spicedbConfig,
        (await readFile(spicedbConfig, "utf8")).replace("/** Interface to bind. Default 127.0.0.1. */", ""),
      );
      expect(await configurationDocProblems(CONFIG_SECTIONS, root)).toContain(
        "packages/spicedb-local/src/config.ts: SPICEDB_LOCAL_HOST has no comment",
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("flags a documentation link to no file, or to no heading of its file", async () => {
    const root = await mkdtemp(join(tmpdir(), "gw-doc-links-"));
    try {
      await mkdir(join(root, "docs/api"), { recursive: true });
      await writeFile(
        join(root, "README.md"),
        "# Top\n\n[ok](docs/api/a.md#some-heading) [gone](docs/missing.md) [`code`](#top) `[not](a/link)`\n",
      );
      await writeFile(
        join(root, "docs/api/a.md"),
        "# A\n\n## Some heading\n\n[up](../../README.md#nowhere)\n",
      );
      expect(await brokenDocLinks(root)).toEqual([
        "README.md: docs/missing.md (no such file)",
        "docs/api/a.md: ../../README.md#nowhere (no such heading in README.md)",
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("finds no broken link in this repository's documentation", async () => {
    expect(await brokenDocLinks(REPO_ROOT)).toEqual([]);
  });

  it("flags a dashboard panel that queries a metric nothing exports", async () => {
    const exported = await exportedMetrics();
    expect(exported.has("gateway_rate_limit_decisions_total")).toBe(true);
    expect(unknownMetrics("dash.json", fixture("dashboard-stale.json"), exported)).toEqual([
      'dash.json: panel "Old name" queries gateway_ratelimit_rejections_total, which nothing exports',
    ]);
  });

  it("tells pinned images from moving ones", () => {
    for (const image of [
      "postgres:17.6",
      "authzed/spicedb:v1.54.0",
      "redis:7.4.6-alpine",
      `a/b@sha256:${"0".repeat(64)}`,
    ])
      expect(isPinned(image), image).toBe(true);
    for (const image of [
      "postgres:17",
      "redis:latest",
      "prom/prometheus",
      "node:24-slim",
      "localhost:5000/x",
    ])
      expect(isPinned(image), image).toBe(false);
  });

  it.each([
    ["unpinned.Dockerfile", ["unpinned.Dockerfile: image node:24-slim is not pinned to a version"]],
    [
      "compose-unpinned.yml",
      [
        "compose-unpinned.yml: image redis:latest is not pinned to a version",
        "compose-unpinned.yml: image postgres:17 is not pinned to a version",
        "compose-unpinned.yml: image prom/prometheus is not pinned to a version",
      ],
    ],
  ])("flags images not pinned to a version in %s", (name, problems) => {
    expect(unpinnedImages(name, fixture(name))).toEqual(problems);
  });

  it("flags a Dockerfile that copies a package's src/ when .dockerignore lets its tests through", () => {
    const dockerfile =
      "FROM node:24.21.0-slim\nCOPY packages/core/src packages/core/src\nCOPY --chown=node packages/service/src/ packages/service/src\n";
    const problems = [
      "Dockerfile: copies packages/core/src, tests included (.dockerignore does not leave out **/*.test.ts)",
      "Dockerfile: copies packages/service/src, tests included (.dockerignore does not leave out **/*.test.ts)",
    ];
    expect(shippedTests("Dockerfile", dockerfile, undefined)).toEqual(problems);
    expect(shippedTests("Dockerfile", dockerfile, "*.test.ts\n")).toEqual(problems);
    expect(
      shippedTests("Dockerfile", dockerfile, "**/*.test.ts\n!packages/service/src/**/*.test.ts\n"),
    ).toEqual(problems);
    expect(shippedTests("Dockerfile", dockerfile, "# no tests\n**/*.test.ts\n")).toEqual([]);
    expect(shippedTests("Dockerfile", "FROM node:24.21.0-slim\nCOPY package.json ./\n", undefined)).toEqual(
      [],
    );
  });

  it.each([
    [
      "compose-spicedb-published.yml",
      [
        "compose-spicedb-published.yml: spicedb publishes SpiceDB on the host; keep it inside the compose network",
      ],
    ],
    [
      "compose-default-secret.yml",
      [
        `compose-default-secret.yml: SPICEDB_PRESHARED_KEY has a default; require it with \${SPICEDB_PRESHARED_KEY:?message}`,
        `compose-default-secret.yml: INTERNAL_ASSERTION_SECRET has a default; require it with \${INTERNAL_ASSERTION_SECRET:?message}`,
      ],
    ],
    [
      "compose-prometheus-bare.yml",
      [
        "compose-prometheus-bare.yml: Prometheus does not mount ./prometheus (its configuration and alert rules)",
        "compose-prometheus-bare.yml: Prometheus keeps its data in no named volume",
      ],
    ],
  ])("flags what compose exposes or defaults in %s", (name, problems) => {
    expect(composeProblems(name, fixture(name))).toEqual(problems);
  });

  it("flags Prometheus jobs that scrape a missing service or the wrong port", () => {
    expect(
      scrapeTargetProblems(
        "prometheus.yml",
        fixture("prometheus-wrong-port.yml"),
        fixture("compose-for-targets.yml"),
      ),
    ).toEqual([
      "prometheus.yml: job gateway scrapes gateway:8080, but gateway serves its metrics on 9464",
      "prometheus.yml: job cache scrapes memcached:9150, but compose has no service memcached",
    ]);
  });

  it("flags a container without a startupProbe or a hardened securityContext", () => {
    const name = "k8s-not-hardened.yaml";
    expect(k8sContainerProblems(name, yamlDocuments(name, fixture(name)))).toEqual([
      `${name}: gateway/gateway has no startupProbe`,
      `${name}: gateway/gateway may run as root (runAsNonRoot)`,
      `${name}: gateway/gateway has no seccompProfile RuntimeDefault`,
      `${name}: gateway/gateway allows privilege escalation`,
      `${name}: gateway/gateway has a writable root filesystem`,
      `${name}: gateway/gateway does not drop all capabilities`,
    ]);
  });

  it("flags ports that do not agree: probes, PORT, METRICS_PORT and the scrape annotation", () => {
    const name = "k8s-ports.yaml";
    expect(k8sContainerProblems(name, yamlDocuments(name, fixture(name)))).toEqual([
      `${name}: gateway/gateway: readinessProbe uses port web, which the container does not declare`,
      `${name}: gateway/gateway: PORT=8000 is not a container port`,
      `${name}: gateway/gateway: METRICS_PORT=9464 is not a container port`,
      `${name}: gateway/gateway: Prometheus scrapes port 8080, but metrics are on 9464`,
    ]);
  });

  it("flags what the manifests together lack: drain, HPA, PDB, metrics reach, Secret keys, a SpiceDBCluster", () => {
    const name = "k8s-cluster-gaps.yaml";
    expect(k8sClusterProblems([{ path: name, docs: yamlDocuments(name, fixture(name)) }])).toEqual([
      "deploy/k8s: no HorizontalPodAutoscaler scales the gateway Deployment",
      "deploy/k8s: no PodDisruptionBudget selects the gateway's pods",
      `${name}: HorizontalPodAutoscaler scales Deployment worker, which does not exist`,
      `${name}: gateway/gateway serves a Service but has no preStop drain`,
      `${name}: no NetworkPolicy lets Prometheus reach gateway's metrics port 9464`,
      `${name}: REDIS_URL reads key REDIS_URL of Secret gateway, which the example Secret lacks`,
      "deploy/k8s: SpiceDB is not a SpiceDBCluster of the SpiceDB operator",
    ]);
  });

  it("flags alert rules that query unknown metrics or have no unit test", async () => {
    const exported = await exportedMetrics();
    expect(
      alertRuleProblems(
        [{ path: "rules-gaps.yml", text: fixture("rules-gaps.yml") }],
        [{ path: "rules-gaps.test.yml", text: fixture("rules-gaps.test.yml") }],
        exported,
      ),
    ).toEqual([
      "rules-gaps.yml: Untested queries gateway_http_requests_totl, which nothing exports",
      "rules-gaps.yml: alert Untested has no promtool test",
    ]);
  });
});

describe.runIf(promtoolInstalled)("promtool", () => {
  it("passes the repository's alert rule tests", async () => {
    expect(await promtoolProblems()).toEqual({ problems: [] });
  });

  it("reports a rule test that fails", async () => {
    const { problems } = await promtoolProblems(undefined, [
      "packages/config-check/test/fixtures/config-check/promtool-failing.test.yml",
    ]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^promtool test rules .*\n[\s\S]*FAILED[\s\S]*GatewayErrorRateHigh/);
  });
});
