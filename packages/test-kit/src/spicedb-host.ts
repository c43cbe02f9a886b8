/**
 * The test SpiceDBs of one test worker, in a process of their own: `startTestSpiceDB`
 * starts it the first time a worker asks for one, and asks it over IPC for
 * each file's server. Each server is the real engine on a port of its own,
 * with the repository's schema and the preshared key it was asked for, as
 * `spicedb-local` runs in `pnpm start`.
 *
 * Why a process: test files share worker processes (`isolate: false`), and
 * a worker that loaded the engine's library would keep its Go runtime, and
 * every file's engine threads, for all its files. The workers keep to
 * JavaScript; the Go runtime lives where it lives in production, in a
 * process that serves SpiceDB and nothing else.
 *
 * Requests: `{ id, start: presharedKey }` → `{ id, port, pid }`; `{ id, close: port }` → `{ id }`;
 * a failure → `{ id, error }`. It stops every server and exits when its worker goes away.
 */
import { join } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "@gw/spicedb-local";

/** Start a server with this preshared key, or close the one on this port. */
export type HostAsk = { start: string } | { close: number };
export type HostRequest = { id: number } & HostAsk;
export type HostReply = { id: number; port?: number; pid?: number; error?: string };

const servers = new Map<number, RunningSpiceDBLocal>();

async function answer(request: HostRequest): Promise<HostReply> {
  if ("start" in request) {
    const server = await startSpiceDBLocal({
      host: "127.0.0.1",
      port: 0,
      presharedKey: request.start,
      schemaFile: join(REPO_ROOT, "spicedb/schema.zed"),
    });
    servers.set(server.port, server);
    return { id: request.id, port: server.port, pid: process.pid };
  }
  const server = servers.get(request.close);
  servers.delete(request.close);
  await server?.close();
  return { id: request.id };
}

if (process.send) {
  process.on("message", (request: HostRequest) => {
    answer(request).then(
      (reply) => process.send?.(reply),
      (err: Error) => process.send?.({ id: request.id, error: err.message }),
    );
  });
  process.once("disconnect", () => {
    void Promise.allSettled([...servers.values()].map((server) => server.close())).then(() =>
      process.exit(0),
    );
  });
}
