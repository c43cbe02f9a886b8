import { isServing } from "@gw/spicedb-local/health";
import { type RunningNodeProcess, startNodeProcess } from "./node-process.ts";

/**
 * `spicedb-local` in its own process on `port` (0: a port it picks and
 * reports), ready once its gRPC health check answers SERVING: it binds its
 * port only after the relationships of its data directory are back in the
 * engine.
 */
export function startSpiceDBLocalProcess(options: {
  port: number;
  env: NodeJS.ProcessEnv;
  inheritOutput?: boolean;
  /** Write its output to this file (its log lines, for a benchmark to read). */
  outputFile?: string;
  timeoutMs?: number;
}): Promise<RunningNodeProcess> {
  return startNodeProcess({
    name: "spicedb-local",
    entry: "packages/spicedb-local/src/main.ts",
    port: options.port,
    env: { ...options.env, SPICEDB_LOCAL_PORT: String(options.port) },
    inheritOutput: options.inheritOutput,
    ...(options.outputFile ? { outputFile: options.outputFile } : {}),
    isReady: (port) => isServing(`127.0.0.1:${port}`),
    timeoutMs: options.timeoutMs ?? 180_000,
  });
}
