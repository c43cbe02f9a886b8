import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningRedis, startRedisServer } from "@gw/devstack";
import { distinctFreePorts } from "./ports.ts";
import { type TestRedisStore, testRedisClient } from "./redis.ts";

/**
 * A real Redis Cluster for one test file: three masters (`redis-server
 * --cluster-enabled yes`) on free ports, joined as `redis-cli --cluster
 * create` joins them, every slot served before this resolves.
 */
export async function startTestRedisCluster(masters = 3): Promise<TestRedisStore> {
  const root = await mkdtemp(join(tmpdir(), "gw-test-redis-cluster-"));
  let servers: RunningRedis[] = [];
  let config: { port: number; busPort: number; dir: string }[] = [];
  const startEach = () =>
    config.map((c) => startRedisServer({ ...c, appendOnly: false, clusterBusPort: c.busPort }));
  for (let attempt = 1; ; attempt++) {
    const ports = await distinctFreePorts(masters * 2);
    config = Array.from({ length: masters }, (_, i) => ({
      port: ports[2 * i]!,
      busPort: ports[2 * i + 1]!,
      dir: join(root, `attempt-${attempt}-node-${i}`),
    }));
    const started = await Promise.allSettled(startEach());
    servers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    if (servers.length === masters) break;
    await Promise.all(servers.map((server) => server.stop()));
    // Another process may have taken a port between our probe and redis-server's bind.
    if (attempt >= 3) throw (started.find((r) => r.status === "rejected") as PromiseRejectedResult).reason;
  }
  const addresses = config.map((c) => `127.0.0.1:${c.port}`);
  await joinCluster(config);
  await untilClusterServes(config.map((c) => c.port));
  return {
    topology: "cluster",
    url: `redis+cluster://${addresses.join(",")}`,
    nodes: servers.map((s) => ({ url: s.url, port: s.port })),
    halt: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
    async restart() {
      servers = await Promise.all(startEach());
      await untilClusterServes(config.map((c) => c.port));
    },
    async stop() {
      await Promise.all(servers.map((server) => server.stop()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

/**
 * Joins fresh cluster-enabled servers into one cluster of masters, as `redis-cli --cluster create
 * --cluster-replicas 0` does: each takes an equal range of the 16384 slots and a config epoch of its own,
 * then the first meets the others (on their cluster bus ports). `redis-cli` then pauses a whole second
 * between its checks that the cluster joined; `untilClusterServes` asks every 20 ms.
 */
async function joinCluster(nodes: { port: number; busPort: number }[]): Promise<void> {
  const clients = nodes.map(({ port }) => testRedisClient(`redis://127.0.0.1:${port}`));
  try {
    const share = Math.ceil(16384 / nodes.length);
    await Promise.all(
      clients.map(async (client, i) => {
        await client.call("CLUSTER", "ADDSLOTSRANGE", i * share, Math.min(16383, (i + 1) * share - 1));
        await client.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1);
      }),
    );
    await Promise.all(
      nodes
        .slice(1)
        .map(({ port, busPort }) => clients[0]!.call("CLUSTER", "MEET", "127.0.0.1", port, busPort)),
    );
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/** Waits until every node reports the cluster healthy with all 16384 slots served and every node known. */
async function untilClusterServes(ports: number[], timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  // One connection per node, asked over and over (a redis-cli per question would be a process each time).
  const clients = ports.map((port) => testRedisClient(`redis://127.0.0.1:${port}`));
  try {
    while (Date.now() < deadline) {
      const infos = await Promise.all(
        clients.map((client) => client.call("CLUSTER", "INFO").then(String, () => "")),
      );
      if (
        infos.every(
          (info) =>
            /cluster_state:ok/.test(info) &&
            /cluster_slots_ok:16384/.test(info) &&
            new RegExp(`cluster_known_nodes:${ports.length}\\b`).test(info),
        )
      )
        return;
      last = infos.join("\n");
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    for (const client of clients) client.disconnect();
  }
  throw new Error(`the test Redis Cluster did not come up within ${timeoutMs} ms:\n${last}`);
}
