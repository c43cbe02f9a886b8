import { randomBytes } from "node:crypto";
import { ManualClock } from "@gw/core/clock";
import { CredentialStore, McpServerStore, Vault } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { createTestDatabase, type TestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let database: TestDatabase;
let db: Postgres;
beforeAll(async () => {
  database = await createTestDatabase();
  db = createPostgres(database.url, { connectionName: "test" });
});
afterAll(async () => {
  await db.close();
  await database.drop();
});

describe("an MCP credential's last use", () => {
  it("is written on the first use and then at most once a minute, not on every proxied call", async () => {
    const clock = new ManualClock();
    const writes: string[] = [];
    const counting = {
      query: ((text: string, values?: unknown[]) => {
        if (/^\s*UPDATE/i.test(text)) writes.push(text);
        return db.query(text, values);
      }) as Postgres["query"],
    };
    const store = new CredentialStore(counting, new Vault([{ id: "k1", key: randomBytes(32) }]), { clock });
    const server = { id: "mcp_0123456789abcdef01234567", origin: "https://tools.example" };
    await new McpServerStore(db, clock).create("acme", {
      id: server.id,
      name: "tools",
      url: `${server.origin}/mcp`,
      description: null,
    });
    await store.put("acme", server, null, { type: "bearer", token: "shared-token" });
    const lastUsed = async () => (await store.list("acme", server.id, "alice"))[0]!.last_used_at;
    expect(await lastUsed()).toBeNull();

    const first = await store.headersFor("acme", server, "alice");
    expect(first).toEqual({ headers: { authorization: "Bearer shared-token" }, source: "shared" });
    const at = await lastUsed();
    expect(at).toBe(Math.floor(clock.wall() / 1000));
    expect(writes).toHaveLength(1);

    clock.advance(59_000);
    await store.headersFor("acme", server, "alice");
    expect(writes).toHaveLength(1);
    expect(await lastUsed()).toBe(at);

    clock.advance(1_000);
    await store.headersFor("acme", server, "alice");
    expect(writes).toHaveLength(2);
    expect(await lastUsed()).toBe(at! + 60);
  });
});
