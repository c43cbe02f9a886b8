import { createPrivateKey, type KeyObject, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "@gw/core/logger";
import { exportJWK, generateKeyPair, importJWK, type JWK } from "jose";

/** Asymmetric algorithms only: `none` and HMAC can never be configured, signed or accepted. */
export const SIGNING_ALGORITHMS = ["ES256", "EdDSA"] as const;
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number];

export interface SigningKeys {
  /** The key that signs new tokens, as Node's own key object (signing goes through node:crypto). */
  active: { kid: string; alg: SigningAlgorithm; key: KeyObject };
  /** Every configured key's public half: what `/.well-known/jwks.json` publishes and what verifies. */
  publicJwks: JWK[];
}

/** A key set that cannot sign; `activeKid`: the problem is `JWT_ACTIVE_KID`, which names no key of it. */
export class SigningKeyConfigError extends Error {
  readonly activeKid: boolean;
  constructor(message: string, activeKid = false) {
    super(message);
    this.name = "SigningKeyConfigError";
    this.activeKid = activeKid;
  }
}

const PUBLIC_MEMBERS = ["kty", "crv", "x", "y", "kid", "alg", "use"] as const;

function publicHalf(jwk: JWK): JWK {
  const out: JWK = {};
  for (const member of PUBLIC_MEMBERS)
    if (jwk[member] !== undefined) (out as Record<string, unknown>)[member] = jwk[member];
  out.use = "sig";
  return out;
}

/**
 * Signing keys from a JWK Set (`{"keys":[…]}`, or a bare array): each with a
 * `kid` and an `alg` of ES256 or EdDSA. Keys with their private part may sign;
 * public-only keys still verify (and are published) during a rotation.
 * `activeKid` picks the signer; by default the first key with a private part.
 */
export async function loadSigningKeys(json: string, activeKid?: string): Promise<SigningKeys> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new SigningKeyConfigError("JWT signing keys are not valid JSON");
  }
  const keys = (Array.isArray(parsed) ? parsed : (parsed as { keys?: unknown })?.keys) as JWK[] | undefined;
  if (!Array.isArray(keys) || keys.length === 0)
    throw new SigningKeyConfigError("JWT signing keys: no keys in the set");
  const kids = new Set<string>();
  for (const jwk of keys) {
    if (!jwk.kid) throw new SigningKeyConfigError("JWT signing keys: every key needs a kid");
    if (kids.has(jwk.kid)) throw new SigningKeyConfigError(`JWT signing keys: kid ${jwk.kid} appears twice`);
    kids.add(jwk.kid);
    if (!SIGNING_ALGORITHMS.includes(jwk.alg as SigningAlgorithm)) {
      throw new SigningKeyConfigError(
        `JWT signing key ${jwk.kid}: alg must be one of ${SIGNING_ALGORITHMS.join(", ")}`,
      );
    }
    // Fails on keys that do not match their alg (e.g. an RSA key labelled ES256).
    await importJWK(publicHalf(jwk), jwk.alg).catch((err: Error) => {
      throw new SigningKeyConfigError(`JWT signing key ${jwk.kid}: ${err.message}`);
    });
  }
  const signer = activeKid ? keys.find((k) => k.kid === activeKid) : keys.find((k) => k.d);
  if (!signer)
    throw new SigningKeyConfigError(
      `JWT signing keys: no key ${activeKid ?? "with a private part"} to sign with`,
      activeKid !== undefined,
    );
  if (!signer.d)
    throw new SigningKeyConfigError(`JWT signing key ${signer.kid} has no private part and cannot sign`);
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: signer as Record<string, unknown>, format: "jwk" });
  } catch (err) {
    throw new SigningKeyConfigError(`JWT signing key ${signer.kid}: ${(err as Error).message}`);
  }
  return {
    active: { kid: signer.kid!, alg: signer.alg as SigningAlgorithm, key },
    publicJwks: keys.map(publicHalf),
  };
}

/** A new ES256 key as a private JWK (for development, and for operators: see the README). */
export async function generateSigningJwk(alg: SigningAlgorithm = "ES256"): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, {
    extractable: true,
    ...(alg === "EdDSA" ? { crv: "Ed25519" } : {}),
  });
  return { ...(await exportJWK(privateKey)), kid: `dev-${randomBytes(6).toString("hex")}`, alg, use: "sig" };
}

/**
 * With no keys configured: a development key kept in `file`, so restarts keep
 * issued tokens valid. Loudly not for production.
 */
export async function developmentSigningKeys(file: string, logger: Logger): Promise<SigningKeys> {
  let json: string;
  try {
    json = await readFile(file, "utf8");
  } catch {
    json = JSON.stringify({ keys: [await generateSigningJwk()] });
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    // Written aside and renamed, so a concurrent reader never sees half a key.
    const partial = `${file}.${process.pid}.tmp`;
    await writeFile(partial, json, { mode: 0o600 });
    await rename(partial, file);
  }
  logger.warn(
    { file },
    "JWT signing: using a development key kept on local disk; production must configure JWT_SIGNING_KEYS or JWT_SIGNING_KEYS_FILE",
  );
  return loadSigningKeys(json);
}
