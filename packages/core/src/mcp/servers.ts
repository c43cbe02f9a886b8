import type { Clock } from "../clock.ts";
import type { Queryable } from "../postgres.ts";
import type { McpReadCache } from "./read-cache.ts";

/** A registered MCP server, as the API shows it. */
export interface McpServer {
  id: string;
  object: "mcp.server";
  name: string;
  url: string;
  description: string | null;
  /** Unix seconds. */
  created_at: number;
}

interface Row {
  id: string;
  name: string;
  url: string;
  description: string | null;
  created_at: string;
}

const view = (row: Row): McpServer => ({
  id: row.id,
  object: "mcp.server",
  name: row.name,
  url: row.url,
  description: row.description,
  created_at: Number(row.created_at),
});

/** Registered MCP servers in PostgreSQL (`mcp_servers`); every statement names the organization. */
export class McpServerStore {
  private readonly db: Queryable;
  private readonly clock: Clock;
  private readonly cache: McpReadCache | undefined;

  /** `clock`: its wall time stamps registrations; `cache`: keeps `get`'s rows, told of every change. */
  constructor(db: Queryable, clock: Clock, cache?: McpReadCache) {
    this.db = db;
    this.clock = clock;
    this.cache = cache;
  }

  async create(
    org: string,
    server: { id: string; name: string; url: string; description: string | null },
  ): Promise<McpServer> {
    const { rows } = await this.db.query<Row>(
      `INSERT INTO mcp_servers (org, id, name, url, description, created_at)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, name, url, description, created_at`,
      [org, server.id, server.name, server.url, server.description, Math.floor(this.clock.wall() / 1000)],
    );
    await this.cache?.changed(org, server.id);
    return view(rows[0]!);
  }

  async get(org: string, id: string): Promise<McpServer | undefined> {
    if (!this.cache) return this.fetch(org, id);
    const server = await this.cache.read(org, id, "server", () => this.fetch(org, id));
    return server && { ...server };
  }

  private async fetch(org: string, id: string): Promise<McpServer | undefined> {
    const { rows } = await this.db.query<Row>(
      "SELECT id, name, url, description, created_at FROM mcp_servers WHERE org = $1 AND id = $2",
      [org, id],
    );
    return rows[0] ? view(rows[0]) : undefined;
  }

  /** The servers of `ids` that exist, in the order of `ids`. */
  async getMany(org: string, ids: string[]): Promise<McpServer[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.db.query<Row>(
      "SELECT id, name, url, description, created_at FROM mcp_servers WHERE org = $1 AND id = ANY($2)",
      [org, ids],
    );
    const byId = new Map(rows.map((r) => [r.id, view(r)]));
    return ids.flatMap((id) => byId.get(id) ?? []);
  }

  /**
   * Changes the fields given. When the URL's origin changes, the server's
   * credentials are deleted in the same transaction: a secret is bound to the
   * origin it was stored for and never sent anywhere else.
   */
  async update(
    org: string,
    id: string,
    patch: { name?: string; url?: string; description?: string | null },
    originChanged: boolean,
  ): Promise<McpServer | undefined> {
    const sets: string[] = [];
    const values: unknown[] = [org, id];
    for (const [column, value] of Object.entries(patch)) {
      if (value === undefined) continue;
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    }
    const statement = `UPDATE mcp_servers SET ${sets.length > 0 ? sets.join(", ") : "id = id"}
       WHERE org = $1 AND id = $2 RETURNING id, name, url, description, created_at`;
    const { rows } = await this.db.query<Row>(
      originChanged
        ? `WITH changed AS (${statement}),
       dropped AS (DELETE FROM mcp_credentials c USING changed WHERE c.org = $1 AND c.server_id = changed.id)
       SELECT * FROM changed`
        : statement,
      values,
    );
    await this.cache?.changed(org, id);
    return rows[0] ? view(rows[0]) : undefined;
  }

  /** Deletes the server and (by cascade) its credentials. */
  async delete(org: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM mcp_servers WHERE org = $1 AND id = $2", [org, id]);
    await this.cache?.changed(org, id);
    return (rowCount ?? 0) > 0;
  }
}
