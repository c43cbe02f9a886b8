import { localServerUrl } from "@gw/devstack";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { type TestDatabase, useTestDatabase } from "../src/index.ts";

// Blocks of one file run one after another, as the files of one worker do: what the first gives back,
// the next one gets.

const connect = async (url: string) => {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  return client;
};

const audit = (client: pg.Client) =>
  client.query(
    "INSERT INTO audit_records (org, at, resource_type, resource_id, record, outcome) VALUES ('o', now(), 't', 'i', '{}', 'allowed') RETURNING seq",
  );

const exists = async (name: string) => {
  const admin = await connect(localServerUrl(inject("postgresPort"), "postgres"));
  try {
    return (await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount === 1;
  } finally {
    await admin.end();
  }
};

let given: TestDatabase & { session?: pg.Client };

describe("a file that uses a migrated database", () => {
  const database = useTestDatabase();

  it("writes rows and leaves a session open", async () => {
    const client = await connect(database.url);
    expect((await audit(client)).rows[0].seq).toBe("1");
    expect((await audit(client)).rows[0].seq).toBe("2");
    await client.query("BEGIN");
    await client.query("LOCK TABLE audit_records IN ACCESS SHARE MODE");
    given = { ...database, session: client };
  });
});

describe("the next file", () => {
  const database = useTestDatabase();

  it("gets that database as a fresh copy is: no rows, sequences restarted, the session left open ended, migrations kept", async () => {
    expect(database.name).toBe(given.name);
    await expect(given.session!.query("SELECT 1")).rejects.toThrow();
    const client = await connect(database.url);
    try {
      expect((await client.query("SELECT count(*)::int AS n FROM audit_records")).rows[0].n).toBe(0);
      expect((await audit(client)).rows[0].seq).toBe("1");
      expect(
        (await client.query("SELECT count(*)::int AS n FROM schema_migrations")).rows[0].n,
      ).toBeGreaterThan(0);
      // This block changes the schema: its database is dropped, not given on.
      await client.query("ALTER TABLE audit_records ADD COLUMN extra int");
    } finally {
      await client.end();
    }
  });
});

describe("the file after a change of schema", () => {
  const database = useTestDatabase();

  it("gets another database, and the changed one is gone", async () => {
    expect(database.name).not.toBe(given.name);
    expect(await exists(given.name)).toBe(false);
    const client = await connect(database.url);
    try {
      const columns = await client.query(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'audit_records' AND column_name = 'extra'",
      );
      expect(columns.rowCount).toBe(0);
    } finally {
      await client.end();
    }
  });
});
