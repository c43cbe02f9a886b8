import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { parse, stringify } from "yaml";
import { REPO_ROOT } from "./node-process.ts";
import { stopProcess } from "./redis-server.ts";
import { spawnStackChild } from "./stack-child.ts";

/** The deployment's Prometheus configuration: its jobs, rules and intervals are what local runs use too. */
export const PROMETHEUS_CONFIG = "deploy/prometheus/prometheus.yml";

/** Jobs scraping this project's processes, which want `METRICS_TOKEN` when it is set. */
const OUR_JOBS = ["gateway", "service", "eval-worker"];

export interface PrometheusOptions {
  port: number;
  /** Its configuration and data (TSDB) go here. */
  dir: string;
  /** `host:port` to scrape, by job name of `deploy/prometheus/prometheus.yml`; jobs not named get no targets. */
  targets: Record<string, string[]>;
  /** Bearer token the gateway and service want for `/metrics` (`METRICS_TOKEN`). */
  metricsToken?: string | undefined;
  /** Scrape and rule evaluation interval; the deployment's when unset. */
  interval?: string;
  /** Prometheus's own log. */
  logFile?: string;
}

export interface RunningPrometheus {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Whether Debian's `prometheus` (and its `promtool`) is installed. */
export async function prometheusInstalled(binary = "prometheus"): Promise<boolean> {
  return new Promise((done) => {
    const child = spawn(binary, ["--version"], { stdio: "ignore" });
    child.once("error", () => done(false));
    child.once("exit", (code) => done(code === 0));
  });
}

/**
 * The deployment's `prometheus.yml` with local targets: its jobs and rule
 * files as they are (rule paths made absolute), each job's targets replaced.
 */
export async function localPrometheusConfig(options: PrometheusOptions): Promise<string> {
  const config = parse(await readFile(resolve(REPO_ROOT, PROMETHEUS_CONFIG), "utf8")) as {
    global?: Record<string, unknown>;
    rule_files?: string[];
    scrape_configs: Record<string, unknown>[];
  };
  const configDir = resolve(REPO_ROOT, PROMETHEUS_CONFIG, "..");
  config.rule_files = (config.rule_files ?? []).map((file) => resolve(configDir, file));
  if (options.interval)
    config.global = {
      ...config.global,
      scrape_interval: options.interval,
      evaluation_interval: options.interval,
    };
  for (const job of config.scrape_configs) {
    const name = String(job.job_name);
    job.static_configs = [{ targets: options.targets[name] ?? [] }];
    if (options.metricsToken && OUR_JOBS.includes(name))
      job.authorization = { credentials: options.metricsToken };
  }
  return stringify(config);
}

/** Runs `prometheus` with the deployment's configuration against local targets; resolves once it is ready. */
export async function startPrometheus(options: PrometheusOptions): Promise<RunningPrometheus> {
  await mkdir(resolve(options.dir, "data"), { recursive: true });
  const configFile = resolve(options.dir, "prometheus.yml");
  await writeFile(configFile, await localPrometheusConfig(options));
  const child = spawnStackChild(
    "prometheus",
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${resolve(options.dir, "data")}`,
      `--web.listen-address=127.0.0.1:${options.port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
    if (options.logFile) void writeFile(options.logFile, log);
  });
  const url = `http://127.0.0.1:${options.port}`;
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(
        new Error(`could not run prometheus (install it: apt-get install -y prometheus): ${err.message}`),
      ),
    );
    child.once("exit", (code) =>
      reject(
        new Error(
          code === 127
            ? `could not run prometheus (install it: apt-get install -y prometheus):\n${log}`
            : `prometheus exited with code ${code}:\n${log}`,
        ),
      ),
    );
  });
  exited.catch(() => {});
  const ready = (async () => {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const ok = await fetch(`${url}/-/ready`).then(
        (res) => res.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`prometheus was not ready within 30 s:\n${log}`);
  })();
  await Promise.race([ready, exited]);
  return { url, process: child, stop: () => stopProcess(child) };
}
