import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { loadConfig } from "../src/config.ts";
import { Vault, VaultUnreadable, vaultKeysSchema } from "../src/mcp/vault.ts";

const key = (id: string) => ({ id, key: randomBytes(32) });
const CONTEXT = ["mcp.credential", "acme", "mcp_1", "alice", "https://tools.example", "bearer"];

describe("the vault's envelope encryption", () => {
  it("opens what it sealed, only for the same context; the ciphertext holds no trace of the secret", () => {
    const vault = new Vault([key("k1")]);
    const sealed = vault.seal("tok-123456", CONTEXT);
    expect(sealed.kekId).toBe("k1");
    expect(sealed.sealed.includes(Buffer.from("tok-123456"))).toBe(false);
    expect(vault.open(sealed, CONTEXT)).toBe("tok-123456");
    for (const i of CONTEXT.keys()) {
      const other = CONTEXT.map((part, j) => (i === j ? `${part}x` : part));
      expect(() => vault.open(sealed, other)).toThrow(VaultUnreadable);
    }
    // Each seal has its own data key and nonces.
    expect(vault.seal("tok-123456", CONTEXT).sealed.equals(sealed.sealed)).toBe(false);
  });

  it("a tampered data key or ciphertext does not open", () => {
    const vault = new Vault([key("k1")]);
    const sealed = vault.seal("tok", CONTEXT);
    const flip = (b: Buffer) => {
      const c = Buffer.from(b);
      c[14] = (c[14] ?? 0) ^ 1;
      return c;
    };
    expect(() => vault.open({ ...sealed, sealed: flip(sealed.sealed) }, CONTEXT)).toThrow(VaultUnreadable);
    expect(() => vault.open({ ...sealed, wrappedKey: flip(sealed.wrappedKey) }, CONTEXT)).toThrow(
      VaultUnreadable,
    );
  });

  it("rotates: a new first key wraps new secrets, old ones still open and are re-wrapped under it; without the old key they do not open", () => {
    const k1 = key("k1");
    const k2 = key("k2");
    const old = new Vault([k1]).seal("tok-old", CONTEXT);
    const rotated = new Vault([k2, k1]);
    expect(rotated.open(old, CONTEXT)).toBe("tok-old");
    expect(rotated.needsRewrap(old)).toBe(true);
    const rewrapped = rotated.rewrap(old, CONTEXT);
    expect(rewrapped.kekId).toBe("k2");
    expect(rewrapped.sealed.equals(old.sealed)).toBe(true);
    expect(new Vault([k2]).open(rewrapped, CONTEXT)).toBe("tok-old");
    expect(() => new Vault([k2]).open(old, CONTEXT)).toThrow(/'k1' is not in VAULT_KEYS/);
    expect(rotated.seal("tok-new", CONTEXT).kekId).toBe("k2");
  });

  it("VAULT_KEYS: id:base64 entries, 32 bytes each, distinct ids", () => {
    const schema = z.object({ VAULT_KEYS: vaultKeysSchema });
    const b64 = randomBytes(32).toString("base64");
    const keys = loadConfig(schema, {
      VAULT_KEYS: `k2:${b64}, k1:${randomBytes(32).toString("base64")}`,
    }).VAULT_KEYS;
    expect(keys.map((k) => k.id)).toEqual(["k2", "k1"]);
    for (const bad of [`k1:${randomBytes(16).toString("base64")}`, b64, `k1:${b64},k1:${b64}`, "bad id:abc"])
      expect(() => loadConfig(schema, { VAULT_KEYS: bad }), bad).toThrow(/VAULT_KEYS/);
  });
});
