import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { join } from "node:path";
import { type Clock, systemClock } from "@gw/core/clock";
import { developmentSecret } from "@gw/core/development-secret";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Queryable } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";

/** What `GET /api/v1/sandbox/connections/github` shows: never the token. */
export interface ConnectionStatus {
  connected: boolean;
  updated_at: number | null;
}

interface StoredConnection {
  nonce: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
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
      "The stored GitHub connection cannot be decrypted (was SANDBOX_CONNECTION_KEY changed?); store it again with PUT /api/v1/sandbox/connections/github",
      { reason: "unreadable_connection" },
    );
    this.name = "UnreadableConnection";
  }
}

/** Binds a ciphertext to its principal: moved under another user's or organization's key, it does not decrypt. */
const associatedData = (p: Principal) =>
  Buffer.from(JSON.stringify(["sandbox.connection.github", p.org, p.user]));

/**
 * Each principal's GitHub credential, AES-256-GCM encrypted in PostgreSQL
 * (`sandbox_connections`) with a
 * fresh 96-bit nonce per write and the principal as additional authenticated
 * data. The token is decrypted only to hand it to one git process.
 */
export class ConnectionStore {
  private readonly db: Queryable;
  private readonly key: Buffer;
  private readonly clock: Clock;

  constructor(db: Queryable, key: Buffer, clock: Clock = systemClock) {
    if (key.length !== 32) throw new Error("the connection key must be 32 bytes");
    this.db = db;
    this.key = key;
    this.clock = clock;
  }

  async put(principal: Principal, token: string): Promise<void> {
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(associatedData(principal));
    const ciphertext = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
    await this.db.query(
      `INSERT INTO sandbox_connections (org, user_id, nonce, ciphertext, tag, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (org, user_id) DO UPDATE SET nonce = $3, ciphertext = $4, tag = $5, updated_at = $6`,
      [
        principal.org,
        principal.user,
        nonce,
        ciphertext,
        cipher.getAuthTag(),
        Math.floor(this.clock.wall() / 1000),
      ],
    );
  }

  async status(principal: Principal): Promise<ConnectionStatus> {
    const record = await this.record(principal);
    return { connected: record !== undefined, updated_at: record ? Number(record.updated_at) : null };
  }

  async delete(principal: Principal): Promise<void> {
    await this.db.query("DELETE FROM sandbox_connections WHERE org = $1 AND user_id = $2", [
      principal.org,
      principal.user,
    ]);
  }

  /** The principal's token; `NoConnection` when none is stored. */
  async token(principal: Principal): Promise<string> {
    const record = await this.record(principal);
    if (!record) throw new NoConnection();
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.key, record.nonce);
      decipher.setAAD(associatedData(principal));
      decipher.setAuthTag(record.tag);
      return Buffer.concat([decipher.update(record.ciphertext), decipher.final()]).toString("utf8");
    } catch {
      throw new UnreadableConnection();
    }
  }

  private async record(principal: Principal): Promise<StoredConnection | undefined> {
    const { rows } = await this.db.query<StoredConnection>(
      "SELECT nonce, ciphertext, tag, updated_at FROM sandbox_connections WHERE org = $1 AND user_id = $2",
      [principal.org, principal.user],
    );
    return rows[0];
  }
}

/** The configured key, or for development one kept under `dataDir` (logged as such). */
export async function connectionKey(
  configured: string | undefined,
  dataDir: string,
  logger: Logger,
): Promise<Buffer> {
  const encoded =
    configured ??
    (await developmentSecret(
      join(dataDir, "sandbox-connection-key"),
      logger,
      "sandbox connections",
      "SANDBOX_CONNECTION_KEY",
    ));
  return Buffer.from(encoded, configured ? "base64" : "base64url");
}
