import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { z } from "zod";
import { ConfigError } from "../config.ts";
import { developmentSecret } from "../development-secret.ts";
import type { Logger } from "../logger.ts";

/**
 * Envelope encryption for stored credentials. Each secret is sealed with a
 * data key of its own (AES-256-GCM, random 96-bit nonce); the data key is
 * wrapped by a key-encryption key (KEK) from `VAULT_KEYS`, named by its id.
 * Both carry the same additional data (what the secret belongs to), so a
 * sealed secret moved to another row, user, server or origin does not open.
 * Rotation: put a new key first in `VAULT_KEYS` and keep the old ones after
 * it; new secrets are wrapped by the first, old ones still open, and each is
 * re-wrapped under the first when next used (`rewrap`): the data and its
 * ciphertext never change, only the wrapped data key.
 * One vault seals every secret of the platform: MCP credentials (in the
 * gateway), organizations' provider keys and sandbox users' GitHub
 * connections (in the service), under the same `VAULT_KEYS` (`vaultKeysOf`).
 */

export interface VaultKey {
  id: string;
  key: Buffer;
}

/** What is stored for one secret: nothing in it opens without a KEK. */
export interface Sealed {
  kekId: string;
  /** nonce (12) | wrapped data key (32) | tag (16). */
  wrappedKey: Buffer;
  /** nonce (12) | ciphertext | tag (16). */
  sealed: Buffer;
}

/** A sealed secret that cannot be opened: its KEK is gone from `VAULT_KEYS`, or it was tampered with. */
export class VaultUnreadable extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "VaultUnreadable";
  }
}

const NONCE = 12;
const TAG = 16;

function encrypt(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const nonce = randomBytes(NONCE);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

function decrypt(key: Buffer, box: Buffer, aad: Buffer): Buffer {
  if (box.length < NONCE + TAG) throw new VaultUnreadable("sealed value too short");
  const decipher = createDecipheriv("aes-256-gcm", key, box.subarray(0, NONCE));
  decipher.setAAD(aad);
  decipher.setAuthTag(box.subarray(box.length - TAG));
  try {
    return Buffer.concat([decipher.update(box.subarray(NONCE, box.length - TAG)), decipher.final()]);
  } catch {
    throw new VaultUnreadable("sealed value does not open (tampered, or bound to something else)");
  }
}

/**
 * A secret sealed before the vault by one AES-256-GCM key of its own
 * (`nonce`, `ciphertext`, `tag`, with `aad` as additional data): opened only
 * to seal it into the vault, so the platform's one cipher stays here.
 * `VaultUnreadable` when it does not open under `key`.
 */
export function openSingleKey(
  key: Buffer,
  box: { nonce: Buffer; ciphertext: Buffer; tag: Buffer },
  aad: Buffer,
): string {
  if (key.length !== 32) throw new VaultUnreadable("the key is not 32 bytes");
  if (box.nonce.length !== NONCE || box.tag.length !== TAG)
    throw new VaultUnreadable("malformed sealed value");
  return decrypt(key, Buffer.concat([box.nonce, box.ciphertext, box.tag]), aad).toString("utf8");
}

export class Vault {
  private readonly keys: Map<string, Buffer>;
  /** The KEK that wraps new data keys (the first of `VAULT_KEYS`). */
  readonly activeKeyId: string;

  constructor(keys: VaultKey[]) {
    if (keys.length === 0) throw new Error("the vault needs at least one key");
    for (const { key } of keys) if (key.length !== 32) throw new Error("vault keys must be 32 bytes");
    this.keys = new Map(keys.map((k) => [k.id, k.key]));
    this.activeKeyId = keys[0]!.id;
  }

  /** Seals `plaintext` for `context` (what it belongs to) with a fresh data key wrapped by the active KEK. */
  seal(plaintext: string, context: readonly string[]): Sealed {
    const aad = associatedData(context);
    const dataKey = randomBytes(32);
    try {
      return {
        kekId: this.activeKeyId,
        wrappedKey: encrypt(this.keys.get(this.activeKeyId)!, dataKey, aad),
        sealed: encrypt(dataKey, Buffer.from(plaintext, "utf8"), aad),
      };
    } finally {
      dataKey.fill(0);
    }
  }

  /** The plaintext, for exactly the `context` it was sealed for; `VaultUnreadable` otherwise. */
  open(sealed: Sealed, context: readonly string[]): string {
    const aad = associatedData(context);
    const dataKey = this.unwrap(sealed, aad);
    try {
      return decrypt(dataKey, sealed.sealed, aad).toString("utf8");
    } finally {
      dataKey.fill(0);
    }
  }

  /** Whether the secret's data key is wrapped by an older KEK than the active one. */
  needsRewrap(sealed: Sealed): boolean {
    return sealed.kekId !== this.activeKeyId;
  }

  /** The same secret with its data key wrapped by the active KEK (the ciphertext is unchanged). */
  rewrap(sealed: Sealed, context: readonly string[]): Sealed {
    const aad = associatedData(context);
    const dataKey = this.unwrap(sealed, aad);
    try {
      return {
        kekId: this.activeKeyId,
        wrappedKey: encrypt(this.keys.get(this.activeKeyId)!, dataKey, aad),
        sealed: sealed.sealed,
      };
    } finally {
      dataKey.fill(0);
    }
  }

  private unwrap(sealed: Sealed, aad: Buffer): Buffer {
    const kek = this.keys.get(sealed.kekId);
    if (!kek) throw new VaultUnreadable(`its key '${sealed.kekId}' is not in VAULT_KEYS`);
    return decrypt(kek, sealed.wrappedKey, aad);
  }
}

const associatedData = (context: readonly string[]) => Buffer.from(JSON.stringify(["gw.vault", ...context]));

/** `VAULT_KEYS`: `id:base64,id:base64…`, each key 32 bytes; the first wraps new secrets. */
export const vaultKeysSchema = z.string().transform((text, ctx): VaultKey[] => {
  const keys: VaultKey[] = [];
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const colon = part.indexOf(":");
    const id = part.slice(0, colon);
    const key = Buffer.from(part.slice(colon + 1), "base64");
    if (colon < 1 || !/^[A-Za-z0-9_-]{1,32}$/.test(id) || key.length !== 32) {
      ctx.addIssue({
        code: "custom",
        message:
          "must be id:base64 entries separated by commas, each key 32 bytes (e.g. `k1:$(openssl rand -base64 32)`)",
      });
      return z.NEVER;
    }
    if (keys.some((k) => k.id === id)) {
      ctx.addIssue({ code: "custom", message: `key id '${id}' appears twice` });
      return z.NEVER;
    }
    keys.push({ id, key });
  }
  if (keys.length === 0) {
    ctx.addIssue({ code: "custom", message: "must name at least one key" });
    return z.NEVER;
  }
  return keys;
});

/** A fresh `VAULT_KEYS` value with one key (development and tests). */
export const newVaultKeys = (id = "dev") => `${id}:${randomBytes(32).toString("base64")}`;

/**
 * The vault's keys as a process is configured: `VAULT_KEYS`; in production
 * (NODE_ENV=production) a process without them refuses to start; otherwise
 * the development key kept under `dataDir` (the gateway and the service
 * share it, as `pnpm start` hands both the same `VAULT_KEYS`), said loudly.
 */
export async function vaultKeysOf(
  configured: VaultKey[] | undefined,
  dataDir: string,
  logger: Logger,
): Promise<VaultKey[]> {
  if (configured) return configured;
  if (process.env.NODE_ENV === "production") {
    throw new ConfigError([
      "VAULT_KEYS: required in production (NODE_ENV=production): the vault's keys (MCP credentials, organizations' provider keys)",
    ]);
  }
  const secret = await developmentSecret(resolve(dataDir, "vault-key"), logger, "the vault", "VAULT_KEYS");
  return [{ id: "dev", key: Buffer.from(secret, "base64url") }];
}
