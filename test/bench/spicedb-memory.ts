/**
 * `pnpm exec node test/bench/spicedb-memory.ts [writes] [recycleAfterWrites]`:
 * the local SpiceDB's resident memory as writes accumulate while the
 * relationships it holds stay the same (1000, each write a TOUCH or DELETE of
 * one of 100 more), with and without the engine's replacement. Prints one line
 * per 5000 writes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import { createLogger } from "@gw/core/logger";
import { startSpiceDBLocal } from "@gw/spicedb-local";

const WRITES = Number(process.argv[2] ?? 20_000);
const RECYCLE = Number(process.argv[3] ?? 0);
const dir = await mkdtemp(join(tmpdir(), "bench-spicedb-memory-"));
const server = await startSpiceDBLocal({
  host: "127.0.0.1",
  port: 0,
  presharedKey: "bench",
  schemaFile: resolve(import.meta.dirname, "../../spicedb/schema.zed"),
  dataDir: dir,
  recycleAfterWrites: RECYCLE,
  logger: createLogger("spicedb-local", process.env.LOG_LEVEL ?? "warn"),
});
const client = v1.NewClient("bench", server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
const relationship = (id: string) =>
  v1.Relationship.create({
    resource: v1.ObjectReference.create({ objectType: "conversation", objectId: `bench/${id}` }),
    relation: "reader",
    subject: v1.SubjectReference.create({
      object: v1.ObjectReference.create({ objectType: "user", objectId: "bench/u" }),
    }),
  });
const write = (operation: v1.RelationshipUpdate_Operation, ids: string[]) =>
  client.promises.writeRelationships(
    v1.WriteRelationshipsRequest.create({
      updates: ids.map((id) => ({ operation, relationship: relationship(id) })),
    }),
  );
await write(
  v1.RelationshipUpdate_Operation.TOUCH,
  Array.from({ length: 1000 }, (_, i) => `base${i}`),
);
const rss = () => `${(process.memoryUsage.rss() / 1024 / 1024).toFixed(0)} MiB`;
console.log(`recycleAfterWrites=${RECYCLE}: start ${rss()}`);
const started = performance.now();
for (let i = 1; i <= WRITES; i++) {
  const op = i % 2 ? v1.RelationshipUpdate_Operation.TOUCH : v1.RelationshipUpdate_Operation.DELETE;
  await write(op, [`w${Math.floor(i / 2) % 100}`]);
  if (i % 5000 === 0 || i === WRITES)
    console.log(
      `  ${i} writes: ${rss()}, ${(i / ((performance.now() - started) / 1000)).toFixed(0)} writes/s, ${server.recycles()} replacements`,
    );
}
client.close();
await server.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
