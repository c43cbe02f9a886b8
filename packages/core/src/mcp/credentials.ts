import type { Clock } from "../clock.ts";
import type { Queryable } from "../postgres.ts";
import type { McpReadCache } from "./read-cache.ts";
import { type Sealed, type Vault, VaultUnreadable } from "./vault.ts";

/** What a caller stores: a bearer token, or one header's value. */
export type CredentialInput =
  | { type: "bearer"; token: string }
  | { type: "header"; name: string; value: string };

/** What the API shows of a credential: never the secret. */
export interface CredentialView {
  scope: "shared" | "me";
  type: "bearer" | "header";
  /** The header's name, for `header`. */
  name?: string;
  created_at: number;
  last_used_at: number | null;
}

/** The headers a credential puts on an upstream request, once opened inside an allowed call. */
export type UpstreamHeaders = Record<string, string>;

interface Row {
  user_id: string;
  type: "bearer" | "header";
  header_name: string | null;
  kek_id: string;
  wrapped_key: Buffer;
  sealed: Buffer;
  created_at: string;
  last_used_at: string | null;
}

/** A credential as `CredentialStore.sealedFor` read it: nothing in it is open. */
export interface SealedCredential {
  readonly org: string;
  readonly serverId: string;
  readonly row: Row | undefined;
}

/** `''` is the shared credential's owner in the table. */
const SHARED = "";

/**
 * The vault's credentials in PostgreSQL (`mcp_credentials`), sealed by the
 * vault with what they belong to (organization, server, user or shared, and
 * the server's origin), so a secret opens only for the server it was stored
 * for. Secrets leave this class only through `headersFor`, which the proxy
 * calls after the authorization check of a call has passed.
 */
/** How old `last_used_at` may be before a use writes it again, in seconds. */
const LAST_USED_RESOLUTION_S = 60;

export class CredentialStore {
  private readonly db: Queryable;
  private readonly vault: Vault;
  private readonly clock: Clock;
  private readonly onUnreadable: ((reason: string) => void) | undefined;
  private readonly cache: McpReadCache | undefined;
  /**
   * Secrets opened from rows the read cache keeps, for the context they were opened for: a row kept
   * unchanged is opened once, not on every call (two AES-GCM opens, a tenth of a millisecond and more
   * on a proxied call). Held no longer than its row: when the cache drops or replaces it (a change,
   * here or on another replica), its opened secret goes with it. Rows read without the cache are
   * new objects each time and never found here.
   */
  private readonly opened = new WeakMap<Row, { context: string; secret: string }>();

  constructor(
    db: Queryable,
    vault: Vault,
    options: {
      /** Its wall time stamps credentials. */
      clock: Clock;
      /** Told when a secret cannot be opened (a key gone from VAULT_KEYS): never the secret. */
      onUnreadable?: (reason: string) => void;
      /** Keeps `sealedFor`'s rows (sealed as stored), told of every change. */
      cache?: McpReadCache;
    },
  ) {
    this.db = db;
    this.vault = vault;
    this.clock = options.clock;
    this.onUnreadable = options.onUnreadable;
    this.cache = options.cache;
  }

  async put(
    org: string,
    server: { id: string; origin: string },
    user: string | null,
    input: CredentialInput,
  ): Promise<CredentialView> {
    const owner = user ?? SHARED;
    const secret = input.type === "bearer" ? input.token : input.value;
    const sealed = this.vault.seal(secret, context(org, server, owner, input.type));
    const { rows } = await this.db.query<Row>(
      `INSERT INTO mcp_credentials
         (org, server_id, user_id, type, header_name, kek_id, wrapped_key, sealed, created_at, last_used_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)
       ON CONFLICT (org, server_id, user_id) DO UPDATE SET type = $4, header_name = $5, kek_id = $6,
         wrapped_key = $7, sealed = $8, created_at = $9, last_used_at = NULL
       RETURNING user_id, type, header_name, created_at, last_used_at`,
      [
        org,
        server.id,
        owner,
        input.type,
        input.type === "header" ? input.name : null,
        sealed.kekId,
        sealed.wrappedKey,
        sealed.sealed,
        Math.floor(this.clock.wall() / 1000),
      ],
    );
    await this.cache?.changed(org, server.id);
    return view(rows[0]!);
  }

  /** The shared credential and `user`'s own, as they are shown. */
  async list(org: string, serverId: string, user: string): Promise<CredentialView[]> {
    const { rows } = await this.db.query<Row>(
      `SELECT user_id, type, header_name, created_at, last_used_at FROM mcp_credentials
       WHERE org = $1 AND server_id = $2 AND user_id IN ('', $3) ORDER BY user_id`,
      [org, serverId, user],
    );
    return rows.map(view);
  }

  async get(org: string, serverId: string, user: string | null): Promise<CredentialView | undefined> {
    const { rows } = await this.db.query<Row>(
      `SELECT user_id, type, header_name, created_at, last_used_at FROM mcp_credentials
       WHERE org = $1 AND server_id = $2 AND user_id = $3`,
      [org, serverId, user ?? SHARED],
    );
    return rows[0] ? view(rows[0]) : undefined;
  }

  async delete(org: string, serverId: string, user: string | null): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "DELETE FROM mcp_credentials WHERE org = $1 AND server_id = $2 AND user_id = $3",
      [org, serverId, user ?? SHARED],
    );
    await this.cache?.changed(org, serverId);
    return (rowCount ?? 0) > 0;
  }

  /**
   * The headers for an upstream request of `user` to the server: their own
   * credential, else the shared one, else none. Opened here, only for the
   * server's current origin; marks it used, and re-wraps it under the active
   * key when an older one sealed it. Call only after the call was allowed.
   */
  async headersFor(
    org: string,
    server: { id: string; origin: string },
    user: string,
  ): Promise<{ headers: UpstreamHeaders; source: "own" | "shared" | "none" }> {
    return this.open(await this.sealedFor(org, server.id, user), server);
  }

  /**
   * The credential a call of `user`'s would use (theirs, else the shared
   * one), still sealed: read beside the call's decision, and opened by
   * `open` only once the call is allowed.
   */
  async sealedFor(org: string, serverId: string, user: string): Promise<SealedCredential> {
    if (!this.cache) return this.fetchSealed(org, serverId, user);
    return this.cache.read(org, serverId, `credential\u0000${user}`, () =>
      this.fetchSealed(org, serverId, user),
    );
  }

  private async fetchSealed(org: string, serverId: string, user: string): Promise<SealedCredential> {
    const { rows } = await this.db.query<Row>(
      `SELECT user_id, type, header_name, kek_id, wrapped_key, sealed, created_at, last_used_at
       FROM mcp_credentials WHERE org = $1 AND server_id = $2 AND user_id IN ('', $3)
       ORDER BY user_id DESC LIMIT 1`,
      [org, serverId, user],
    );
    return { org, serverId, row: rows[0] };
  }

  /** The headers of a credential read by `sealedFor`, for the server it was read for. */
  async open(
    credential: SealedCredential,
    server: { id: string; origin: string },
  ): Promise<{ headers: UpstreamHeaders; source: "own" | "shared" | "none" }> {
    const { org, row } = credential;
    if (credential.serverId !== server.id)
      throw new Error("A credential opens only for the server it was read for");
    if (!row) return { headers: {}, source: "none" };
    const ctx = context(org, server, row.user_id, row.type);
    const stored: Sealed = { kekId: row.kek_id, wrappedKey: row.wrapped_key, sealed: row.sealed };
    const contextKey = JSON.stringify(ctx);
    const kept = this.opened.get(row);
    let secret = kept?.context === contextKey ? kept.secret : undefined;
    if (secret === undefined) {
      try {
        secret = this.vault.open(stored, ctx);
      } catch (err) {
        if (!(err instanceof VaultUnreadable)) throw err;
        this.onUnreadable?.(err.message);
        return { headers: {}, source: "none" };
      }
      if (this.cache) this.opened.set(row, { context: contextKey, secret });
    }
    const rewrapped = this.vault.needsRewrap(stored) ? this.vault.rewrap(stored, ctx) : undefined;
    const now = Math.floor(this.clock.wall() / 1000);
    // `last_used_at` is kept to the minute: a write on every call would cost each proxied call a
    // round trip to PostgreSQL and a row version, for a time nobody reads to the second.
    const stale = row.last_used_at === null || now - Number(row.last_used_at) >= LAST_USED_RESOLUTION_S;
    if (rewrapped || stale)
      await this.db.query(
        `UPDATE mcp_credentials SET last_used_at = $4
         ${rewrapped ? ", kek_id = $5, wrapped_key = $6" : ""}
       WHERE org = $1 AND server_id = $2 AND user_id = $3`,
        [org, server.id, row.user_id, now, ...(rewrapped ? [rewrapped.kekId, rewrapped.wrappedKey] : [])],
      );
    if (stale) row.last_used_at = String(now);
    if (rewrapped) {
      // A kept copy of the row (McpReadCache) is the stored one from now on.
      row.kek_id = rewrapped.kekId;
      row.wrapped_key = rewrapped.wrappedKey;
    }
    const headers =
      row.type === "bearer" ? { authorization: `Bearer ${secret}` } : { [row.header_name!]: secret };
    return { headers, source: row.user_id === SHARED ? "shared" : "own" };
  }
}

function context(org: string, server: { id: string; origin: string }, owner: string, type: string) {
  return ["mcp.credential", org, server.id, owner, server.origin, type];
}

function view(row: Row): CredentialView {
  return {
    scope: row.user_id === SHARED ? "shared" : "me",
    type: row.type,
    ...(row.type === "header" && row.header_name ? { name: row.header_name } : {}),
    created_at: Number(row.created_at),
    last_used_at: row.last_used_at === null ? null : Number(row.last_used_at),
  };
}
