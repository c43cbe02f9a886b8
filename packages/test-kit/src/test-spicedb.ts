import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { v1 } from "@gw/core/authz";
import type { HostAsk, HostReply } from "./spicedb-host.ts";

/** A test file's SpiceDB: the real engine on a port of its own, with the repository's schema. */
export interface TestSpiceDB {
  port: number;
  endpoint: string;
  presharedKey: string;
  /** The process that serves it: this worker's SpiceDB host. */
  hostPid: number;
  close(): Promise<void>;
}

/** How much of the SpiceDB host's error output is kept, for the error when it dies. */
const HOST_OUTPUT_CHARS = 8 * 1024;

/** This worker's SpiceDB host, while it runs. */
interface SpiceDBHost {
  ask(ask: HostAsk): Promise<HostReply>;
  exited: boolean;
}

let current: SpiceDBHost | undefined;

/**
 * This worker's SpiceDB host (`spicedb-host.ts`), started on first use: the
 * engine's Go runtime stays out of the test worker, which runs many files.
 * It neither keeps the worker alive nor outlives it. If it dies, what it last
 * printed goes to the worker's error output, and the next request starts another.
 */
function spicedbHost(): SpiceDBHost {
  if (current && !current.exited) return current;
  const child = spawn(process.execPath, [join(import.meta.dirname, "spicedb-host.ts")], {
    stdio: ["ignore", "ignore", "pipe", "ipc"],
    // The engine's Go runtime collects garbage a quarter as often as by default (GOGC=100): a fifth
    // less CPU per check, for a larger heap, which a test's few relationships keep small anyway.
    env: { ...process.env, GOGC: process.env.GOGC ?? "400" },
  });
  let output = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    output = (output + chunk).slice(-HOST_OUTPUT_CHARS);
  });
  const pending = new Map<number, { resolve: (reply: HostReply) => void; reject: (err: Error) => void }>();
  let next = 0;
  const idle = () => {
    if (pending.size > 0) return;
    child.channel?.unref();
    (child.stderr as { unref?: () => void } | null)?.unref?.();
  };
  const host: SpiceDBHost = {
    exited: false,
    ask(ask) {
      const id = ++next;
      child.channel?.ref();
      (child.stderr as { ref?: () => void } | null)?.ref?.();
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.send({ id, ...ask });
      });
    },
  };
  child.on("message", (reply: HostReply) => {
    const waiting = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.error) waiting?.reject(new Error(`test SpiceDB: ${reply.error}`));
    else waiting?.resolve(reply);
    idle();
  });
  child.on("exit", (code, signal) => {
    host.exited = true;
    const failure = `the test SpiceDB host exited (${signal ?? code}); its last output:\n${output}`;
    process.stderr.write(`${failure}\n`);
    for (const waiting of pending.values()) waiting.reject(new Error(failure));
    pending.clear();
  });
  child.unref();
  idle();
  current = host;
  return host;
}

/** The real SpiceDB engine, served on a free port with the repository's schema and a random preshared key. */
export async function startTestSpiceDB(): Promise<TestSpiceDB> {
  const presharedKey = randomBytes(16).toString("hex");
  const host = spicedbHost();
  const { port, pid } = await host.ask({ start: presharedKey });
  if (port === undefined || pid === undefined)
    throw new Error("test SpiceDB: the host answered without a port");
  let closed: Promise<void> | undefined;
  return {
    port,
    endpoint: `127.0.0.1:${port}`,
    presharedKey,
    hostPid: pid,
    close: () => {
      // A host that is gone took its servers with it.
      closed ??= host.exited ? Promise.resolve() : host.ask({ close: port }).then(() => undefined);
      return closed;
    },
  };
}

/**
 * SpiceDB's deadline (`SPICEDB_DEADLINE_MS`) in the test stacks whose subject it is not: their checks and
 * writes must answer however loaded the machine, and a test of the deadline sets its own. At the default
 * 2 s, on a machine running two suites and `pnpm start` at once, a check or a stored response's owner
 * write took longer: a store-outage test got the authorization backend's 503 where PostgreSQL's was
 * asserted, and a stored response's first call answered 503.
 */
export const UNHURRIED_SPICEDB_DEADLINE_MS = "30000";

/** The environment that points a gateway or service at a test SpiceDB. */
export function spicedbEnv(spicedb: { endpoint: string; presharedKey: string }): Record<string, string> {
  return {
    SPICEDB_ENDPOINT: spicedb.endpoint,
    SPICEDB_PRESHARED_KEY: spicedb.presharedKey,
    SPICEDB_INSECURE: "true",
  };
}

/**
 * The relationships matching `filter`, read fully consistently through the
 * stock client, as `zed relationship read` shows them: `relation subject-id`, sorted.
 */
export async function readRelationshipLines(
  spicedb: { endpoint: string; presharedKey: string },
  filter: { resourceType: string; optionalResourceId?: string; optionalResourceIdPrefix?: string },
): Promise<string[]> {
  const zed = v1.NewClient(
    spicedb.presharedKey,
    spicedb.endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
  try {
    const read = await zed.promises.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: v1.Consistency.create({
          requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
        }),
        relationshipFilter: v1.RelationshipFilter.create(filter),
      }),
    );
    return read.map(({ relationship: r }) => `${r?.relation} ${r?.subject?.object?.objectId}`).sort();
  } finally {
    zed.close();
  }
}
