/**
 * What `pnpm check:config` checks of `deploy/` beyond variable names:
 * images pinned to versions, compose's exposure and secrets, Prometheus's
 * wiring, and the Kubernetes manifests' probes, hardening, ports, scaling
 * and network policies. Each check takes the parsed documents and returns
 * problems as sentences naming the file.
 */
import { parseAllDocuments } from "yaml";

type Node = Record<string, unknown>;

/** Every YAML document of a file, as plain objects; a file that does not parse is refused. */
export function yamlDocuments(path: string, text: string): Node[] {
  return parseAllDocuments(text).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]!.message}`);
    return (doc.toJS() ?? {}) as Node;
  });
}

const asArray = (value: unknown): Node[] => (Array.isArray(value) ? (value as Node[]) : []);
const asNode = (value: unknown): Node => (value && typeof value === "object" ? (value as Node) : {});

/**
 * An image is pinned when its tag names a version down to at least the minor
 * (`postgres:17.6`, `authzed/spicedb:v1.54.0`, `redis:7.4.6-alpine`) or it has
 * a digest; `latest`, no tag or a major alone (`postgres:17`) move under you.
 */
export function isPinned(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const tag = /:([^/:]+)$/.exec(image)?.[1];
  return tag !== undefined && /^v?\d+\.\d+/.test(tag);
}

/** Images a compose file, Kubernetes manifest or Dockerfile uses, that are not pinned. */
export function unpinnedImages(path: string, text: string): string[] {
  const images: string[] = [];
  if (/Dockerfile$/.test(path)) {
    const stages = new Set<string>();
    for (const [, image, stage] of text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)) {
      if (!stages.has(image!)) images.push(image!);
      if (stage) stages.add(stage);
    }
  } else {
    const visit = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(visit);
      else if (node && typeof node === "object") {
        const record = node as Node;
        if (typeof record.image === "string") images.push(record.image);
        Object.values(record).forEach(visit);
      }
    };
    yamlDocuments(path, text).forEach(visit);
  }
  return images
    .filter((image) => !isPinned(image))
    .map((image) => `${path}: image ${image} is not pinned to a version`);
}

/** The line of a `.dockerignore` that leaves every test file out of the build context. */
export const NO_TESTS = "**/*.test.ts";

/**
 * A Dockerfile that copies a package's `src/` would ship the tests that sit
 * beside the routes there, unless the build context's `.dockerignore` (the
 * repository's: the context is its root) leaves them out. `dockerignore` is
 * undefined when there is none.
 */
export function shippedTests(path: string, dockerfile: string, dockerignore: string | undefined): string[] {
  const ignored = (dockerignore ?? "").split("\n").map((line) => line.trim());
  if (ignored.includes(NO_TESTS) && !ignored.some((line) => line.startsWith("!") && line.includes(".test.")))
    return [];
  return [...dockerfile.matchAll(/^COPY\s+(?:--\S+\s+)*(\S*\bsrc)\/?\s/gim)].map(
    (m) => `${path}: copies ${m[1]}, tests included (.dockerignore does not leave out ${NO_TESTS})`,
  );
}

/**
 * docker-compose: SpiceDB is not published on the host, no secret has a
 * default (`${VAR:-value}`: a known key in every deployment that forgot to
 * set it; `${VAR:?message}` makes compose refuse to start instead), and
 * Prometheus loads its alert rules and keeps its data in a volume.
 */
export function composeProblems(path: string, text: string): string[] {
  const problems: string[] = [];
  const services = asNode(yamlDocuments(path, text)[0]?.services);
  for (const [name, service] of Object.entries(services)) {
    const image = String(asNode(service).image ?? "");
    if (/(^|\/)spicedb:/.test(image) && asNode(service).ports !== undefined)
      problems.push(`${path}: ${name} publishes SpiceDB on the host; keep it inside the compose network`);
  }
  for (const [, variable] of text.matchAll(/\$\{(\w*(?:KEY|SECRET|TOKEN|PASSWORD)\w*):?-[^}]+\}/g))
    problems.push(`${path}: ${variable} has a default; require it with \${${variable}:?message}`);
  const prometheus = Object.values(services)
    .map(asNode)
    .find((s) => /(^|\/)prometheus:/.test(String(s.image ?? "")));
  if (!prometheus) problems.push(`${path}: no Prometheus service`);
  else {
    const volumes = asArray(prometheus.volumes).map(String);
    if (!volumes.some((v) => /^\.\/prometheus:\/etc\/prometheus/.test(v)))
      problems.push(`${path}: Prometheus does not mount ./prometheus (its configuration and alert rules)`);
    if (!volumes.some((v) => /^[\w-]+:\/prometheus/.test(v)))
      problems.push(`${path}: Prometheus keeps its data in no named volume`);
  }
  return problems;
}

/** Containers of this project's images (`llm-authz-gateway/…`) in a Deployment, with their pod. */
function ourContainers(doc: Node): { pod: Node; container: Node; annotations: Node }[] {
  if (doc.kind !== "Deployment") return [];
  const template = asNode(asNode(doc.spec).template);
  const pod = asNode(template.spec);
  return asArray(pod.containers)
    .filter((c) => String(c.image ?? "").startsWith("llm-authz-gateway/"))
    .map((container) => ({ pod, container, annotations: asNode(asNode(template.metadata).annotations) }));
}

const envValue = (container: Node, name: string) =>
  asArray(container.env).find((e) => e.name === name)?.value as string | undefined;

/**
 * Kubernetes: each of this project's containers has a startupProbe and a
 * hardened securityContext (non-root, RuntimeDefault seccomp, no
 * privilege escalation, read-only root filesystem, every capability
 * dropped); its probes use ports it declares, its PORT and METRICS_PORT are
 * container ports, and the Prometheus annotation names the metrics port.
 */
export function k8sContainerProblems(path: string, docs: Node[]): string[] {
  const problems: string[] = [];
  for (const doc of docs) {
    for (const { pod, container, annotations } of ourContainers(doc)) {
      const where = `${path}: ${asNode(doc.metadata).name}/${container.name}`;
      if (!container.startupProbe) problems.push(`${where} has no startupProbe`);
      const podSecurity = asNode(pod.securityContext);
      const security = asNode(container.securityContext);
      if (podSecurity.runAsNonRoot !== true && security.runAsNonRoot !== true)
        problems.push(`${where} may run as root (runAsNonRoot)`);
      const seccomp = asNode(security.seccompProfile).type ?? asNode(podSecurity.seccompProfile).type;
      if (seccomp !== "RuntimeDefault") problems.push(`${where} has no seccompProfile RuntimeDefault`);
      if (security.allowPrivilegeEscalation !== false) problems.push(`${where} allows privilege escalation`);
      if (security.readOnlyRootFilesystem !== true) problems.push(`${where} has a writable root filesystem`);
      if (!asArray(asNode(security.capabilities).drop).map(String).includes("ALL"))
        problems.push(`${where} does not drop all capabilities`);

      const ports = asArray(container.ports);
      const named = new Set(ports.map((p) => p.name));
      const numbers = new Set(ports.map((p) => Number(p.containerPort)));
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const port = asNode(asNode(container[probe]).httpGet).port;
        if (port !== undefined && !named.has(port) && !numbers.has(Number(port)))
          problems.push(`${where}: ${probe} uses port ${port}, which the container does not declare`);
      }
      for (const variable of ["PORT", "METRICS_PORT"]) {
        const value = envValue(container, variable);
        if (value !== undefined && !numbers.has(Number(value)))
          problems.push(`${where}: ${variable}=${value} is not a container port`);
      }
      const scraped = annotations["prometheus.io/port"];
      const metricsPort = envValue(container, "METRICS_PORT") ?? envValue(container, "PORT");
      if (scraped !== undefined && String(scraped) !== metricsPort)
        problems.push(`${where}: Prometheus scrapes port ${scraped}, but metrics are on ${metricsPort}`);
    }
  }
  return problems;
}

const matches = (selector: Node, labels: Node) =>
  Object.entries(asNode(selector.matchLabels)).every(([k, v]) => labels[k] === v);

/**
 * Kubernetes, across all manifests: containers behind a Service drain
 * (a preStop hook, so load balancers stop sending before SIGTERM); the
 * gateway has an HPA and a PDB that find it; every Deployment of ours that is covered by NetworkPolicies still
 * admits its metrics port; every Secret key a container reads (not
 * optional) is in the example Secret; the SpiceDBCluster's secret has the
 * operator's keys.
 */
export function k8sClusterProblems(files: { path: string; docs: Node[] }[]): string[] {
  const problems: string[] = [];
  const all = files.flatMap(({ path, docs }) => docs.map((doc) => ({ path, doc })));
  const ofKind = (kind: string) => all.filter(({ doc }) => doc.kind === kind);
  const deployments = ofKind("Deployment");
  const labelsOf = (d: Node) => asNode(asNode(asNode(asNode(d.spec).template).metadata).labels);

  const gateway = deployments.find(({ doc }) => asNode(doc.metadata).name === "gateway");
  if (!gateway) problems.push("deploy/k8s: no gateway Deployment");
  else {
    const hpa = ofKind("HorizontalPodAutoscaler").find(
      ({ doc }) => asNode(asNode(doc.spec).scaleTargetRef).name === "gateway",
    );
    if (!hpa) problems.push("deploy/k8s: no HorizontalPodAutoscaler scales the gateway Deployment");
    const pdb = ofKind("PodDisruptionBudget").find(({ doc }) =>
      matches(asNode(asNode(doc.spec).selector), labelsOf(gateway.doc)),
    );
    if (!pdb) problems.push("deploy/k8s: no PodDisruptionBudget selects the gateway's pods");
  }
  for (const hpa of ofKind("HorizontalPodAutoscaler")) {
    const target = asNode(asNode(hpa.doc.spec).scaleTargetRef);
    if (!deployments.some(({ doc }) => asNode(doc.metadata).name === target.name))
      problems.push(
        `${hpa.path}: HorizontalPodAutoscaler scales ${target.kind} ${target.name}, which does not exist`,
      );
  }

  const services = ofKind("Service").map(({ doc }) => asNode(asNode(doc.spec).selector));
  for (const { path, doc } of deployments) {
    if (
      !services.some(
        (selector) => Object.keys(selector).length > 0 && matches({ matchLabels: selector }, labelsOf(doc)),
      )
    )
      continue;
    for (const { container } of ourContainers(doc)) {
      if (!asNode(container.lifecycle).preStop)
        problems.push(
          `${path}: ${asNode(doc.metadata).name}/${container.name} serves a Service but has no preStop drain`,
        );
    }
  }

  const policies = ofKind("NetworkPolicy");
  for (const { path, doc } of deployments) {
    for (const { container } of ourContainers(doc)) {
      const metricsPort = Number(envValue(container, "METRICS_PORT") ?? envValue(container, "PORT"));
      const covering = policies.filter((p) => matches(asNode(asNode(p.doc.spec).podSelector), labelsOf(doc)));
      if (covering.length === 0) continue; // no policy: all traffic is admitted
      const admitted = covering.some((p) =>
        asArray(asNode(p.doc.spec).ingress).some(
          (rule) => !rule.ports || asArray(rule.ports).some((port) => Number(port.port) === metricsPort),
        ),
      );
      if (!admitted)
        problems.push(
          `${path}: no NetworkPolicy lets Prometheus reach ${asNode(doc.metadata).name}'s metrics port ${metricsPort}`,
        );
    }
  }

  const example = ofKind("Secret").filter(({ doc }) => asNode(doc.metadata).name === "gateway");
  const provided = new Set(example.flatMap(({ doc }) => Object.keys(asNode(doc.stringData ?? doc.data))));
  for (const { path, doc } of deployments) {
    for (const { container } of ourContainers(doc)) {
      for (const env of asArray(container.env)) {
        const ref = asNode(asNode(env.valueFrom).secretKeyRef);
        if (ref.name === "gateway" && ref.optional !== true && !provided.has(String(ref.key)))
          problems.push(
            `${path}: ${env.name} reads key ${ref.key} of Secret gateway, which the example Secret lacks`,
          );
      }
    }
  }

  const spicedb = ofKind("SpiceDBCluster");
  if (spicedb.length === 0)
    problems.push("deploy/k8s: SpiceDB is not a SpiceDBCluster of the SpiceDB operator");
  for (const { path, doc } of spicedb) {
    const secretName = asNode(doc.spec).secretName;
    const secret = ofKind("Secret").find(({ doc: s }) => asNode(s.metadata).name === secretName);
    const keys = Object.keys(asNode(secret?.doc.stringData ?? secret?.doc.data));
    for (const key of ["datastore_uri", "preshared_key"]) {
      if (!keys.includes(key))
        problems.push(`${path}: the SpiceDBCluster's Secret ${secretName} has no ${key}`);
    }
  }
  return problems;
}

/** Where each of this project's compose services serves `/metrics`, by the image default ports. */
const DEFAULT_PORTS: Record<string, number> = { gateway: 8080, service: 8081 };

/**
 * Prometheus's jobs scrape services that exist in compose, and this
 * project's on the port their metrics are on (METRICS_PORT, else PORT).
 */
export function scrapeTargetProblems(path: string, prometheusText: string, composeText: string): string[] {
  const problems: string[] = [];
  const services = asNode(yamlDocuments("docker-compose.yml", composeText)[0]?.services);
  const config = yamlDocuments(path, prometheusText)[0] ?? {};
  for (const job of asArray(config.scrape_configs)) {
    for (const target of asArray(job.static_configs).flatMap((c) => asArray(c.targets).map(String))) {
      const [host, port] = target.split(":");
      const service = services[host!] as Node | undefined;
      if (!service) {
        problems.push(`${path}: job ${job.job_name} scrapes ${target}, but compose has no service ${host}`);
        continue;
      }
      const target_ = String(asNode(service.build).target ?? "");
      if (!(target_ in DEFAULT_PORTS)) continue;
      const env = asNode(service.environment);
      const expected = Number(env.METRICS_PORT ?? env.PORT ?? DEFAULT_PORTS[target_]);
      if (Number(port) !== expected)
        problems.push(
          `${path}: job ${job.job_name} scrapes ${target}, but ${host} serves its metrics on ${expected}`,
        );
    }
  }
  return problems;
}
