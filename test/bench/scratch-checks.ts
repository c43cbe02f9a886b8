import { resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import { startSpiceDBLocal } from "@gw/spicedb-local";

const SIZES = (process.argv[2] ?? "1000,10000,30000").split(",").map(Number);
const BULK = process.argv[3] === "bulk";
const server = await startSpiceDBLocal({
  host: "127.0.0.1",
  port: 0,
  presharedKey: "bench",
  schemaFile: resolve(import.meta.dirname, "../../spicedb/schema.zed"),
});
const client = v1.NewClient("bench", server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
const rel = (id: string, relation: string, type: string, sid: string) =>
  v1.RelationshipUpdate.create({
    operation: v1.RelationshipUpdate_Operation.TOUCH,
    relationship: v1.Relationship.create({
      resource: v1.ObjectReference.create({ objectType: "response", objectId: `bench/${id}` }),
      relation,
      subject: v1.SubjectReference.create({ object: v1.ObjectReference.create({ objectType: type, objectId: sid }) }),
    }),
  });
const updatesFor = (i: number) => [rel(`r${i}`, "owner", "user", "bench/alice"), rel(`r${i}`, "organization", "organization", "bench")];
const rss = () => `${(process.memoryUsage.rss() / 1024 / 1024).toFixed(0)} MiB`;
let n = 0;
for (const size of SIZES) {
  const t0 = performance.now();
  if (BULK) {
    while (n < size) {
      const u = [];
      for (let k = 0; k < 500 && n < size; k++) u.push(...updatesFor(n++));
      await client.promises.writeRelationships(v1.WriteRelationshipsRequest.create({ updates: u }));
    }
  } else {
    let next = n;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < size) { const i = next++; await client.promises.writeRelationships(v1.WriteRelationshipsRequest.create({ updates: updatesFor(i) })); }
    }));
    n = size;
  }
  const wt = performance.now() - t0;
  const lat: number[] = [];
  for (let c = 0; c < 300; c++) {
    const id = `r${Math.floor(Math.random() * n)}`;
    const s = performance.now();
    await client.promises.checkPermission(v1.CheckPermissionRequest.create({
      resource: v1.ObjectReference.create({ objectType: "response", objectId: `bench/${id}` }),
      permission: "read",
      subject: v1.SubjectReference.create({ object: v1.ObjectReference.create({ objectType: "user", objectId: `bench/u${c}x${size}` }) }),
      consistency: v1.Consistency.create({ requirement: { oneofKind: "minimizeLatency", minimizeLatency: true } }),
    }));
    lat.push(performance.now() - s);
  }
  lat.sort((a, b) => a - b);
  console.log(`${BULK ? "bulk" : "one-by-one"} ${size}: write ${(wt / 1000).toFixed(1)}s, check p50 ${lat[150]!.toFixed(2)} ms p90 ${lat[270]!.toFixed(2)}, rss ${rss()}`);
}
client.close();
await server.close();
process.exit(0);
