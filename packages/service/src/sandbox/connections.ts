import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { join } from "node:path";
import { AppError, developmentSecret, type Logger, type Principal, type RedisClient } from "@gw/core";

/** What `GET /api/v1/sandbox/connections/github` shows: never the token. */
export interface ConnectionStatus {
  connected: boolean;
  updated_at: number | null;
}

interface StoredConnection {
  v: 1;
  nonce: string;
  ciphertext: string;
  tag: string;
  updated_at: number;
}

export class NoConnection extends AppError {
  constructor() {
    super(
      "conflict",
      "No GitHub connection is stored for this user; store one with PUT /api/v1/sandbox/connections/github",
    );
    this.name = "NoConnection";
  }
}

export class UnreadableConnection extends AppError {
  constructor() {
    super(
      "conflict",
      "The stored GitHub connection cannot be decrypted (was SANDBOX_CONNECTION_KEY changed?); store it again with PUT /api/v1/sandbox/connections/github",
    );
    this.name = "UnreadableConnection";
  }
}

const redisKey = (p: Principal) => `gw:sandbox:connection:{${p.org}}:${p.user}`;

/** Binds a ciphertext to its principal: moved under another user's or organization's key, it does not decrypt. */
const associatedData = (p: Principal) =>
  Buffer.from(JSON.stringify(["sandbox.connection.github", p.org, p.user]));

/**
 * Each principal's GitHub credential, AES-256-GCM encrypted in Redis with a
 * fresh 96-bit nonce per write and the principal as additional authenticated
 * data. The token is decrypted only to hand it to one git process.
 */
export class ConnectionStore {
  private readonly redis: RedisClient;
  private readonly key: Buffer;

  constructor(redis: RedisClient, key: Buffer) {
    if (key.length !== 32) throw new Error("the connection key must be 32 bytes");
    this.redis = redis;
    this.key = key;
  }

  async put(principal: Principal, token: string): Promise<void> {
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(associatedData(principal));
    const ciphertext = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
    const record: StoredConnection = {
      v: 1,
      nonce: nonce.toString("base64"),
      ciphertext: ciphertext.toString("base64"),
      tag: cipher.getAuthTag().toString("base64"),
      updated_at: Math.floor(Date.now() / 1000),
    };
    await this.redis.set(redisKey(principal), JSON.stringify(record));
  }

  async status(principal: Principal): Promise<ConnectionStatus> {
    const record = await this.record(principal);
    return { connected: record !== undefined, updated_at: record?.updated_at ?? null };
  }

  async delete(principal: Principal): Promise<void> {
    await this.redis.del(redisKey(principal));
  }

  /** The principal's token; `NoConnection` when none is stored. */
  async token(principal: Principal): Promise<string> {
    const record = await this.record(principal);
    if (!record) throw new NoConnection();
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(record.nonce, "base64"));
      decipher.setAAD(associatedData(principal));
      decipher.setAuthTag(Buffer.from(record.tag, "base64"));
      return Buffer.concat([
        decipher.update(Buffer.from(record.ciphertext, "base64")),
        decipher.final(),
      ]).toString("utf8");
    } catch {
      throw new UnreadableConnection();
    }
  }

  private async record(principal: Principal): Promise<StoredConnection | undefined> {
    const json = await this.redis.get(redisKey(principal));
    return json ? (JSON.parse(json) as StoredConnection) : undefined;
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
