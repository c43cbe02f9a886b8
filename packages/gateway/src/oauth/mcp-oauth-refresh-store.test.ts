import { ManualClock } from "@gw/core/clock";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RefreshTokens } from "./refresh-tokens.ts";

const database = useTestDatabase();
let db: Postgres;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "refresh-store-test" });
});
afterAll(async () => {
  await db?.close();
});

const grant = (user: string) => ({
  org: "org-refresh",
  user,
  keyId: "key_1",
  clientId: "mcpc_00000000000000000000000000000001",
  resource: "https://gateway.test/api/v1/mcp/servers/mcp_000000000000000000000001/mcp",
  scope: "mcp:call",
});

/** Records the families a revocation marks, or refuses to (Redis unable to take them). */
const marks = (fail = false) => {
  const marked: string[] = [];
  return {
    marked,
    mark: async (families: Iterable<string>) => {
      if (fail) throw new Error("redis is away");
      marked.push(...families);
    },
  };
};

describe("refresh tokens in PostgreSQL", () => {
  it("expire after their lifetime, and the sweep deletes them (used or not) while live ones stay", async () => {
    const clock = new ManualClock();
    const tokens = new RefreshTokens(db, clock, 3_600, marks());
    const { token: old } = await tokens.issue(grant("ann"));
    const rotated = await tokens.rotate(old, grant("ann").clientId);
    expect(rotated.outcome).toBe("rotated");
    clock.advance(1_800_000);
    const { token: young } = await tokens.issue(grant("ben"));
    clock.advance(1_800_000);
    // Ann's two tokens have reached their hour; Ben's is half way.
    const successor = rotated.outcome === "rotated" ? rotated.token : "";
    expect((await tokens.rotate(successor, grant("ann").clientId)).outcome).toBe("invalid");
    expect(await tokens.sweep()).toBe(2);
    expect((await tokens.rotate(young, grant("ben").clientId)).outcome).toBe("rotated");
  });

  it("a token is for the client it was issued to: another client presenting it is refused and revokes nothing", async () => {
    const tokens = new RefreshTokens(db, new ManualClock(), 3_600, marks());
    const { token } = await tokens.issue(grant("cat"));
    expect((await tokens.rotate(token, "mcpc_00000000000000000000000000000002")).outcome).toBe("invalid");
    expect((await tokens.rotate(token, grant("cat").clientId)).outcome).toBe("rotated");
  });

  it("a revocation marks the families it revoked, in the same transaction: a mark not written undoes it", async () => {
    const recorder = marks();
    const tokens = new RefreshTokens(db, new ManualClock(), 3_600, recorder);
    const first = await tokens.issue(grant("dan"));
    const second = await tokens.issue(grant("dan"));
    await tokens.issue(grant("eve"));
    expect(await tokens.revokeFor("org-refresh", "dan")).toBe(2);
    expect(recorder.marked.sort()).toEqual([first.family, second.family].sort());

    const failing = new RefreshTokens(db, new ManualClock(), 3_600, marks(true));
    const { token } = await failing.issue(grant("fay"));
    await expect(failing.revokeFor("org-refresh", "fay")).rejects.toThrow(/redis is away/);
    // Not revoked: the administrator's revoke failed as a whole and may be tried again.
    expect((await failing.rotate(token, grant("fay").clientId)).outcome).toBe("rotated");
  });
});
