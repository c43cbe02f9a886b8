import { ManualClock } from "@gw/core/clock";
import { OAuthError } from "@gw/core/errors";
import { UpstreamPolicy } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { OAuthClients, UNUSED_CLIENT_TTL_SECONDS } from "./clients.ts";

const database = useTestDatabase();
let db: Postgres;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "oauth-clients-store-test" });
});
afterAll(async () => {
  await db?.close();
});
beforeEach(async () => {
  await db.query("DELETE FROM oauth_clients");
});

const clientsWith = (clock: ManualClock, maxUnusedClients: number) =>
  new OAuthClients(db, {
    policy: new UpstreamPolicy({ allowPrivate: false }),
    clock,
    cacheSize: 10,
    cacheTtlMs: 60_000,
    timeoutMs: 1_000,
    maxUnusedClients,
  });
const metadata = { client_name: "Host", redirect_uris: ["http://127.0.0.1:4000/cb"] };

describe("registered MCP clients in PostgreSQL", () => {
  it("past MCP_OAUTH_MAX_UNUSED_CLIENTS registrations not yet used, registration is temporarily_unavailable; a used one no longer counts", async () => {
    const clients = clientsWith(new ManualClock(), 2);
    const first = await clients.register(metadata);
    await clients.register(metadata);
    const refused = await clients.register(metadata).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OAuthError);
    expect((refused as OAuthError).oauthCode).toBe("temporarily_unavailable");
    await clients.markUsed(first.client_id);
    await expect(clients.register(metadata)).resolves.toMatchObject({ client_id: expect.any(String) });
  });

  it("a registration never used is refused a day after it was made, and the sweep deletes it; a used one stays", async () => {
    const clock = new ManualClock();
    const clients = clientsWith(clock, 100);
    const unused = await clients.register(metadata);
    const used = await clients.register(metadata);
    await clients.markUsed(used.client_id);
    clock.advance(UNUSED_CLIENT_TTL_SECONDS * 1000 - 1_000);
    expect(await clients.find(unused.client_id)).toBeDefined();
    expect(await clients.sweep()).toBe(0);
    clock.advance(1_000);
    expect(await clients.find(unused.client_id)).toBeUndefined();
    expect(await clients.find(used.client_id)).toBeDefined();
    expect(await clients.sweep()).toBe(1);
    const { rows } = await db.query<{ client_id: string }>("SELECT client_id FROM oauth_clients");
    expect(rows.map((r) => r.client_id)).toEqual([used.client_id]);
  });

  it("two registrations at the cap's edge at the same moment: the count and the insert are one step, so only one passes", async () => {
    const clients = clientsWith(new ManualClock(), 1);
    const probe = createPostgres(database.url, { connectionName: "oauth-clients-race-test" });
    try {
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const lockTaken = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holding = probe.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext('oauth_clients_registration'))");
        locked();
        await released;
      });
      await lockTaken;
      const both = [clients.register(metadata), clients.register(metadata)].map((p) =>
        p.then(
          () => "registered",
          (err: unknown) => (err instanceof OAuthError ? err.oauthCode : String(err)),
        ),
      );
      const waiting = async () =>
        Number(
          (
            await probe.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT pg_advisory_xact_lock%'`,
            )
          ).rows[0]!.n,
        );
      while ((await waiting()) < 2) await new Promise((r) => setTimeout(r, 10));
      release();
      await holding;
      expect((await Promise.all(both)).sort()).toEqual(["registered", "temporarily_unavailable"]);
    } finally {
      await probe.close();
    }
  });
});
