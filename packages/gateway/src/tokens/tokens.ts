import { hash, randomUUID, sign } from "node:crypto";
import { entryBound } from "@gw/core/bounded-cache";
import { type Clock, systemClock } from "@gw/core/clock";
import type { Permission } from "@gw/core/permissions";
import { orgIdSchema, principalUserIdSchema } from "@gw/core/principal";
import { createLocalJWKSet, errors, type JWTPayload, jwtVerify } from "jose";
import { LRUCache } from "lru-cache";
import { SIGNING_ALGORITHMS, type SigningKeys } from "./signing-keys.ts";

/** The claims of a gateway token beyond the registered ones. */
export interface GatewayTokenClaims extends JWTPayload {
  sub: string;
  org: string;
  /** Id of the API key that minted the token: its quotas apply, and revoking it ends the token. */
  key_id: string;
  permissions: Permission[];
  /**
   * The authorization an OAuth-issued token belongs to (its refresh-token
   * family): revoking that authorization ends the token at once (checked on
   * every request, `authenticate`). Absent from tokens minted from an API key.
   */
  sid?: string;
}

/** Clock skew tolerated on `exp`, `nbf` and `iat`. */
export const CLOCK_TOLERANCE_SECONDS = 30;

export class InvalidToken extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = "InvalidToken";
    this.reason = reason;
  }
}

/** Tokens verified recently, kept by the SHA-256 of audience and token (never the token itself). */
const MAX_VERIFIED_TOKENS = 10_000;

/**
 * Signs gateway tokens with the active key and verifies them against every
 * published key. A verified token's claims are kept until it expires, so its
 * signature is checked once, not on every request; whether its issuing key
 * still exists and is active is for the caller to check each time.
 */
export class TokenService {
  readonly issuer: string;
  private readonly keys: SigningKeys;
  private readonly jwks: ReturnType<typeof createLocalJWKSet>;
  /** The encoded protected header, the same for every token. */
  private readonly header: string;
  private readonly clock: Clock;
  /** Verified claims, each until its token's expiry (plus the skew) on the clock's wall time. */
  private readonly verified: LRUCache<string, GatewayTokenClaims>;

  constructor(keys: SigningKeys, issuer: string, clock: Clock = systemClock) {
    this.keys = keys;
    this.issuer = issuer;
    this.clock = clock;
    this.verified = new LRUCache({
      ...entryBound(MAX_VERIFIED_TOKENS),
      ttlResolution: 0,
      perf: { now: () => clock.wall() },
    });
    this.jwks = createLocalJWKSet({ keys: keys.publicJwks });
    this.header = base64url({ alg: keys.active.alg, kid: keys.active.kid, typ: "JWT" });
  }

  get publicJwks() {
    return this.keys.publicJwks;
  }

  /** A compact JWS (RFC 7515) of the claims, signed with the active key: ES256 (IEEE P1363 r‖s) or EdDSA. */
  async sign(
    claims: {
      sub: string;
      aud: string;
      org: string;
      keyId: string;
      permissions: Permission[];
      /** The OAuth authorization (refresh-token family) the token belongs to. */
      sid?: string;
    },
    expiresIn: number,
  ): Promise<string> {
    const now = Math.floor(this.clock.wall() / 1000);
    const payload = base64url({
      org: claims.org,
      key_id: claims.keyId,
      permissions: claims.permissions,
      iss: this.issuer,
      sub: claims.sub,
      aud: claims.aud,
      iat: now,
      nbf: now,
      exp: now + expiresIn,
      jti: randomUUID(),
      ...(claims.sid !== undefined ? { sid: claims.sid } : {}),
    });
    const input = `${this.header}.${payload}`;
    // node:crypto directly: WebCrypto's asynchronous round trip costs more than the signature.
    const { alg, key } = this.keys.active;
    const signature =
      alg === "ES256"
        ? sign("sha256", Buffer.from(input), { key, dsaEncoding: "ieee-p1363" })
        : sign(null, Buffer.from(input), key);
    return `${input}.${signature.toString("base64url")}`;
  }

  /** Verifies a token addressed to `audience` (or to any of several); throws `InvalidToken` with a reason for metrics. */
  async verify(token: string, audience: string | string[]): Promise<GatewayTokenClaims> {
    const id = hash("sha256", `${[audience].flat().join("\n")}\n${token}`, "base64url");
    const known = this.verified.get(id);
    if (known) return known;
    const claims = await this.verifyOnce(token, audience);
    // Accepted until its expiry, with the same skew jwtVerify allows (lru-cache calls an entry stale once
    // its age exceeds the ttl: one millisecond less ends it at that time).
    const ttl = ((claims.exp as number) + CLOCK_TOLERANCE_SECONDS) * 1000 - this.clock.wall() - 1;
    if (ttl > 0) this.verified.set(id, claims, { ttl });
    return claims;
  }

  private async verifyOnce(token: string, audience: string | string[]): Promise<GatewayTokenClaims> {
    try {
      const { payload } = await jwtVerify(token, this.jwks, {
        issuer: this.issuer,
        audience,
        algorithms: [...SIGNING_ALGORITHMS],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: new Date(this.clock.wall()),
        requiredClaims: ["sub", "exp", "nbf", "iat", "jti", "org", "key_id", "permissions"],
      });
      if (
        typeof payload.org !== "string" ||
        typeof payload.key_id !== "string" ||
        !Array.isArray(payload.permissions) ||
        !payload.permissions.every((p) => typeof p === "string") ||
        (payload.sid !== undefined && typeof payload.sid !== "string")
      ) {
        throw new InvalidToken("malformed", "Token claims are malformed");
      }
      // A signature proves who issued the token, not that its claims fit: the subject obeys the same
      // rules as an `externalUserId`, whatever key signed it.
      if (!principalUserIdSchema.safeParse(payload.sub).success) {
        throw new InvalidToken("claims", "Token claim 'sub' is not a valid user id");
      }
      if (!orgIdSchema.safeParse(payload.org).success) {
        throw new InvalidToken("claims", "Token claim 'org' is not a valid organization id");
      }
      if ((payload.iat as number) > this.clock.wall() / 1000 + CLOCK_TOLERANCE_SECONDS) {
        throw new InvalidToken("claims", "Token claim 'iat' is in the future");
      }
      return payload as GatewayTokenClaims;
    } catch (err) {
      if (err instanceof InvalidToken) throw err;
      throw classify(err);
    }
  }
}

function classify(err: unknown): InvalidToken {
  if (err instanceof errors.JWTExpired) return new InvalidToken("expired", "Token has expired");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "aud") return new InvalidToken("audience", "Token is not addressed to this gateway");
    if (err.claim === "nbf") return new InvalidToken("not_yet_valid", "Token is not valid yet");
    return new InvalidToken("claims", `Token claim '${err.claim}' is invalid`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed)
    return new InvalidToken("algorithm", "Token algorithm is not allowed");
  if (err instanceof errors.JWKSNoMatchingKey)
    return new InvalidToken("unknown_key", "Token signing key is unknown");
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return new InvalidToken("signature", "Token signature is invalid");
  return new InvalidToken("malformed", "Token is malformed");
}

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** Gateway tokens are compact JWS; API keys never contain a dot. */
export function looksLikeJwt(credential: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(credential);
}
