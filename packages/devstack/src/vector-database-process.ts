import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { REPO_ROOT, type RunningNodeProcess, startNodeProcess } from "./node-process.ts";
import { vectorDatabaseUrl } from "./vector-database.ts";

export interface RunningVectorDatabaseProcess extends RunningNodeProcess {
  /** What VECTOR_DATABASE_URL says to reach it. */
  databaseUrl: string;
}

/** Whether something accepts a TCP connection on 127.0.0.1:`port`. */
function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * The local vector database (`vector-database-main.ts`) in its own process:
 * PGlite runs its queries on the event loop of the process that holds it, so
 * it gets one of its own. On `port` (0: a port it picks and reports), ready
 * once it accepts connections, which it does only after PGlite has started.
 * `inMemory`: nothing is kept (the tests); otherwise its data is under
 * `$DATA_DIR/vectors` of `env`.
 */
export async function startVectorDatabaseProcess(options: {
  port: number;
  env: NodeJS.ProcessEnv;
  inMemory?: boolean;
  /** A new database (in memory, or a data directory with none yet) starts from this dump of a new cluster, made first if missing (LOCAL_VECTOR_DATABASE_TEMPLATE). */
  templateFile?: string;
  inheritOutput?: boolean;
  timeoutMs?: number;
}): Promise<RunningVectorDatabaseProcess> {
  const started = await startNodeProcess({
    name: "vector-database",
    entry: "packages/devstack/src/vector-database-main.ts",
    port: options.port,
    env: {
      ...options.env,
      LOCAL_VECTOR_DATABASE_PORT: String(options.port),
      LOCAL_VECTOR_DATABASE_IN_MEMORY: options.inMemory ? "true" : "false",
      ...(options.templateFile ? { LOCAL_VECTOR_DATABASE_TEMPLATE: options.templateFile } : {}),
    },
    inheritOutput: options.inheritOutput,
    isReady: accepting,
    // PGlite compiles its WebAssembly and creates or recovers its cluster first: seconds on a busy machine.
    timeoutMs: options.timeoutMs ?? 120_000,
  });
  return { ...started, databaseUrl: vectorDatabaseUrl(started.port) };
}

/**
 * Where `pnpm start` and the tests keep a dump of a new PGlite cluster to start new vector databases
 * from (`templateFile`): in the project's `node_modules/.cache`, one per PGlite version, made by the
 * first start that finds none.
 */
export function vectorDatabaseTemplateFile(): string {
  const manifest = join(import.meta.dirname, "..", "node_modules", "@electric-sql", "pglite", "package.json");
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
  return join(REPO_ROOT, "node_modules", ".cache", `pglite-${version}-cluster.tar`);
}
