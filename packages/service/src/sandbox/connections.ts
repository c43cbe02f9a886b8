import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { openSingleKey, type Sealed, type Vault, VaultUnreadable } from "@gw/core/mcp";
import type { Queryable } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";

/** What `GET /api/v1/sandbox/connections/github` shows: never the token. */
export interface ConnectionStatus {
  connected: boolean;
  updated_at: number | null;
}

/** A row holds one of two formats: the vault's, or (written before it) one key's nonce, ciphertext and tag. */
interface StoredConnection {
  kek_id: string | null;
  wrapped_key: Buffer | null;
  sealed: Buffer | null;
  nonce: Buffer | null;
  ciphertext: Buffer | null;
  tag: Buffer | null;
  updated_at: string;
}

export class NoConnection extends AppError {
  constructor() {
    super(
      "conflict",
      "No GitHub connection is stored for this user; store one with PUT /api/v1/sandbox/connections/github",
      { reason: "no_connection" },
    );
    this.name = "NoConnection";
  }
}

export class UnreadableConnection extends AppError {
  constructor() {
    super(
      "conflict",
      "The stored GitHub connection cannot be opened (its key is gone from VAULT_KEYS, or it was stored before the vault and SANDBOX_CONNECTION_KEY no longer opens it); store it again with PUT /api/v1/sandbox/connections/github",
      { reason: "unreadable_connection" },
    );
    this.name = "UnreadableConnection";
  }
}

/** What a token is sealed for: moved under another user's or organization's key, it does not open. */
const context = (p: Principal) => ["sandbox.connection.github", p.org, p.user];

export interface ConnectionStoreOptions {
  clock?: Clock;
  /**
   * `SANDBOX_CONNECTION_KEY` (or its development file), when there is one:
   * read only to move rows stored before the vault into it.
   */
  legacyKey?: Buffer | undefined;
  /** For tests: runs after `token` read the row, before it writes it (a re-wrap, a move into the vault). */
  afterRead?: () => Promise<void>;
}

/**
 * Each principal's GitHub credential in PostgreSQL (`sandbox_connections`),
 * sealed by the platform's vault (`VAULT_KEYS`: a data key per write, wrapped
 * by the active key, re-wrapped under a newer one when next read) for the
 * organization and user. Rows stored before the vault, under one
 * `SANDBOX_CONNECTION_KEY`, are moved into it the first time they are read.
 * The token is opened only to hand it to one git process.
 */
export class ConnectionStore {
  private readonly db: Queryable;
  private readonly vault: Vault;
  private readonly clock: Clock;
  private readonly options: ConnectionStoreOptions;

  constructor(db: Queryable, vault: Vault, options: ConnectionStoreOptions = {}) {
    if (options.legacyKey && options.legacyKey.length !== 32)
      throw new Error("the connection key must be 32 bytes");
    this.db = db;
    this.vault = vault;
    this.clock = options.clock ?? systemClock;
    this.options = options;
  }

  async put(principal: Principal, token: string): Promise<void> {
    const sealed = this.vault.seal(token, context(principal));
    await this.db.query(
      `INSERT INTO sandbox_connections (org, user_id, kek_id, wrapped_key, sealed, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (org, user_id) DO UPDATE SET kek_id = $3, wrapped_key = $4, sealed = $5,
         nonce = NULL, ciphertext = NULL, tag = NULL, updated_at = $6`,
      [
        principal.org,
        principal.user,
        sealed.kekId,
        sealed.wrappedKey,
        sealed.sealed,
        Math.floor(this.clock.wall() / 1000),
      ],
    );
  }

  async status(principal: Principal): Promise<ConnectionStatus> {
    const { rows } = await this.db.query<{ updated_at: string }>(
      "SELECT updated_at FROM sandbox_connections WHERE org = $1 AND user_id = $2",
      [principal.org, principal.user],
    );
    const record = rows[0];
    return { connected: record !== undefined, updated_at: record ? Number(record.updated_at) : null };
  }

  async delete(principal: Principal): Promise<void> {
    await this.db.query("DELETE FROM sandbox_connections WHERE org = $1 AND user_id = $2", [
      principal.org,
      principal.user,
    ]);
  }

  /** The principal's token; `NoConnection` when none is stored, `UnreadableConnection` when it does not open. */
  async token(principal: Principal): Promise<string> {
    const { rows } = await this.db.query<StoredConnection>(
      `SELECT kek_id, wrapped_key, sealed, nonce, ciphertext, tag, updated_at
       FROM sandbox_connections WHERE org = $1 AND user_id = $2`,
      [principal.org, principal.user],
    );
    const row = rows[0];
    if (!row) throw new NoConnection();
    if (row.kek_id !== null && row.wrapped_key && row.sealed)
      return this.openSealed(principal, {
        kekId: row.kek_id,
        wrappedKey: row.wrapped_key,
        sealed: row.sealed,
      });
    if (row.nonce && row.ciphertext && row.tag)
      return this.moveIntoVault(principal, { nonce: row.nonce, ciphertext: row.ciphertext, tag: row.tag });
    throw new UnreadableConnection();
  }

  private async openSealed(principal: Principal, stored: Sealed): Promise<string> {
    const ctx = context(principal);
    const token = unreadableAsConflict(() => this.vault.open(stored, ctx));
    await this.options.afterRead?.();
    if (this.vault.needsRewrap(stored)) {
      const rewrapped = this.vault.rewrap(stored, ctx);
      // Only the data key it was read with: a token stored meanwhile has one of its own.
      await this.db.query(
        `UPDATE sandbox_connections SET kek_id = $3, wrapped_key = $4
         WHERE org = $1 AND user_id = $2 AND wrapped_key = $5`,
        [principal.org, principal.user, rewrapped.kekId, rewrapped.wrappedKey, stored.wrappedKey],
      );
    }
    return token;
  }

  /** A row stored before the vault: opened with the old key, then sealed by the vault in its place. */
  private async moveIntoVault(
    principal: Principal,
    old: { nonce: Buffer; ciphertext: Buffer; tag: Buffer },
  ): Promise<string> {
    const key = this.options.legacyKey;
    if (!key) throw new UnreadableConnection();
    const token = unreadableAsConflict(() => openSingleKey(key, old, legacyAssociatedData(principal)));
    await this.options.afterRead?.();
    const sealed = this.vault.seal(token, context(principal));
    // Only the row it was read from (its nonce was fresh): a token stored meanwhile is already in the vault.
    await this.db.query(
      `UPDATE sandbox_connections SET kek_id = $3, wrapped_key = $4, sealed = $5,
         nonce = NULL, ciphertext = NULL, tag = NULL
       WHERE org = $1 AND user_id = $2 AND nonce = $6`,
      [principal.org, principal.user, sealed.kekId, sealed.wrappedKey, sealed.sealed, old.nonce],
    );
    return token;
  }
}

function unreadableAsConflict(open: () => string): string {
  try {
    return open();
  } catch (err) {
    if (err instanceof VaultUnreadable) throw new UnreadableConnection();
    throw err;
  }
}

/** The additional data rows stored before the vault were encrypted with. */
const legacyAssociatedData = (p: Principal) =>
  Buffer.from(JSON.stringify(["sandbox.connection.github", p.org, p.user]));

/**
 * The key of rows stored before the vault: `SANDBOX_CONNECTION_KEY`, or the
 * development key an earlier version kept under `dataDir`; none (and none
 * made) when neither is there.
 */
export async function legacyConnectionKey(
  configured: string | undefined,
  dataDir: string,
): Promise<Buffer | undefined> {
  if (configured) return Buffer.from(configured, "base64");
  const kept = await readFile(join(dataDir, "sandbox-connection-key"), "utf8").then(
    (text) => text.trim(),
    () => "",
  );
  if (!kept) return undefined;
  const key = Buffer.from(kept, "base64url");
  return key.length === 32 ? key : undefined;
}
