import { createHmac, createSecretKey, hash, type KeyObject, timingSafeEqual } from "node:crypto";
import { type Clock, systemClock } from "./clock.ts";
import { developmentSecret } from "./development-secret.ts";
import { AppError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import type { Logger } from "./logger.ts";
import type { Permission } from "./permissions.ts";
import type { Principal } from "./principal.ts";
import { randomHex } from "./random.ts";
import { type RedisClient, sentTogether } from "./redis.ts";

/** Header that carries the gateway's assertion of who a forwarded request acts as. */
export const ASSERTION_HEADER = "x-gateway-assertion";

/** Lifetime of an assertion: it only has to survive one hop. */
const ASSERTION_TTL_SECONDS = 30;
const ISSUER = "llm-gateway";
const AUDIENCE = "llm-gateway-service";
/** Seconds of clock skew between gateway and service that an assertion's times tolerate. */
const CLOCK_TOLERANCE_SECONDS = 5;
/** Seconds a used assertion's id is remembered: longer than any assertion is accepted. */
const USED_TTL_SECONDS = 60;
const REQUIRED_CLAIMS = ["sub", "exp", "jti", "org", "key_id", "permissions", "htm", "htu_sha256", "rid"];
/** The JOSE header of every assertion, encoded once. */
const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");

/** The service refuses a request whose assertion is missing, forged, stale, replayed or made for another request. */
export class InvalidAssertion extends AppError {
  constructor(reason: string) {
    super("unauthorized", `Gateway assertion refused: ${reason}`, {
      reason: "invalid_assertion",
      headers: { "WWW-Authenticate": 'Bearer realm="gateway"' },
    });
    this.name = "InvalidAssertion";
  }
}

/** The path is bound by its digest: the header stays small however long the path is. */
/**
 * Paths' digests, remembered: gateway and service digest each request's path, most of them one of a few.
 * At most `DIGESTS_KEPT` paths of at most `REMEMBERED_PATH_CHARS` each (a longer one is digested each
 * time), so requests with made-up paths cannot make it hold much.
 */
const digests = new Map<string, string>();
const DIGESTS_KEPT = 1_024;
const REMEMBERED_PATH_CHARS = 256;

function pathDigest(path: string): string {
  if (path.length > REMEMBERED_PATH_CHARS) return hash("sha256", path, "base64url");
  let digest = digests.get(path);
  if (digest === undefined) {
    if (digests.size >= DIGESTS_KEPT) digests.clear();
    digest = hash("sha256", path, "base64url");
    digests.set(path, digest);
  }
  return digest;
}

/**
 * What the service needs to admit a model call: the key's limits as the
 * gateway resolved them (its own or `DEFAULT_LIMITS`, end-user windows with
 * the organization's defaults). The gateway has counted the request in the
 * key's request windows already, whatever its path.
 */
export interface Admission {
  limits: Limits;
}

export interface AssertedRequest {
  method: string;
  /** Path and query as the service receives them. */
  path: string;
  requestId: string;
}

/**
 * The gateway's word to the service about who a forwarded request acts as:
 * a JWT (HS256, a secret only the two share) valid for 30 s and bound to the
 * request's method, path (its SHA-256) and request id, so it cannot be replayed on another
 * request or later. Only the gateway holds credentials; the service trusts
 * nothing else.
 */
export class InternalAssertions {
  private readonly key: KeyObject;
  private readonly clock: Clock;

  /** `clock`: whose wall time stamps and checks the assertions' `iat` and `exp` (tests move it). */
  constructor(secret: string, clock: Clock = systemClock) {
    if (secret.length < 32) throw new Error("the internal assertion secret must be at least 32 characters");
    this.key = createSecretKey(Buffer.from(secret, "utf8"));
    this.clock = clock;
  }

  /**
   * A compact JWS (RFC 7515) signed with HMAC-SHA256 by `node:crypto`, in
   * the caller's turn of the event loop: one HMAC of a few hundred bytes
   * (a WebCrypto key import and sign, as a JWT library does it, cost the
   * hot path about ten times as much).
   */
  sign(principal: Principal, request: AssertedRequest, admission?: Admission): Promise<string> {
    const now = Math.floor(this.clock.wall() / 1000);
    const claims = {
      ...(admission ? { lim: admission.limits } : {}),
      org: principal.org,
      key_id: principal.keyId,
      permissions: principal.permissions,
      ...(principal.models ? { models: principal.models } : {}),
      ...(principal.cache ? { cache: principal.cache } : {}),
      credential: principal.credential,
      obo: principal.onBehalfOf,
      eu: principal.endUser ?? principal.onBehalfOf,
      htm: request.method,
      htu_sha256: pathDigest(request.path),
      rid: request.requestId,
      iss: ISSUER,
      aud: AUDIENCE,
      sub: principal.user,
      iat: now,
      exp: now + ASSERTION_TTL_SECONDS,
      jti: randomHex(24),
    };
    const signed = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
    return Promise.resolve(`${signed}.${this.mac(signed).toString("base64url")}`);
  }

  private mac(signed: string): Buffer {
    return createHmac("sha256", this.key).update(signed).digest();
  }

  /** The claims of a genuine, unexpired assertion (HS256 only, issuer and audience ours, every claim we need present). */
  private claimsOf(assertion: string): Record<string, unknown> {
    const parts = assertion.split(".");
    if (parts.length !== 3) throw new InvalidAssertion("assertion invalid");
    const [header, payload, signature] = parts as [string, string, string];
    const expected = this.mac(`${header}.${payload}`);
    const given = Buffer.from(signature, "base64url");
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new InvalidAssertion("assertion invalid");
    const decoded = (part: string): unknown => {
      try {
        return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
      } catch {
        throw new InvalidAssertion("assertion invalid");
      }
    };
    // The header every assertion is signed with is HS256 without `crit`: only another one is read.
    if (header !== HEADER) {
      const protectedHeader = decoded(header) as { alg?: unknown; crit?: unknown } | null;
      if (protectedHeader?.alg !== "HS256" || protectedHeader.crit !== undefined)
        throw new InvalidAssertion("assertion invalid");
    }
    const claims = decoded(payload);
    if (typeof claims !== "object" || claims === null || Array.isArray(claims))
      throw new InvalidAssertion("assertion invalid");
    const c = claims as Record<string, unknown>;
    const now = Math.floor(this.clock.wall() / 1000);
    const audience = Array.isArray(c.aud) ? c.aud : [c.aud];
    if (
      REQUIRED_CLAIMS.some((name) => c[name] === undefined) ||
      c.iss !== ISSUER ||
      !audience.includes(AUDIENCE) ||
      typeof c.exp !== "number" ||
      (c.iat !== undefined && typeof c.iat !== "number") ||
      (c.nbf !== undefined && (typeof c.nbf !== "number" || c.nbf > now + CLOCK_TOLERANCE_SECONDS))
    )
      throw new InvalidAssertion("assertion invalid");
    if (c.exp <= now - CLOCK_TOLERANCE_SECONDS) throw new InvalidAssertion("assertion expired");
    return c;
  }

  /**
   * `verify`, and the assertion's first use: its id is remembered in Redis
   * (shared by every replica of gateway and service) for as long as it could
   * be accepted, so the same request sent again is refused ("already used").
   * Every door that admits an assertion admits it through here.
   */
  async verifyOnce(
    assertion: string,
    request: AssertedRequest,
    redis: Pick<RedisClient, "set">,
  ): Promise<{ principal: Principal; jti: string; admission?: Admission }> {
    const { verified, firstUse } = await this.verifyFirstUse(assertion, request, redis);
    await firstUse;
    return verified;
  }

  /**
   * `verifyOnce` in two steps: the assertion is verified now (a forged,
   * expired or misdirected one throws), and its id sent to Redis;
   * `firstUse` settles when Redis answers, rejecting a replay ("already
   * used"). Nothing may act on the request before `firstUse` resolves: what
   * does not act (parsing, validating) may run meanwhile. `beside` runs just
   * before the id is sent: what it asks Redis travels with it.
   */
  async verifyFirstUse(
    assertion: string,
    request: AssertedRequest,
    redis: Pick<RedisClient, "set">,
    beside?: (principal: Principal) => void,
  ): Promise<{
    verified: { principal: Principal; jti: string; admission?: Admission };
    firstUse: Promise<void>;
  }> {
    const verified = await this.verify(assertion, request);
    // What `beside` asks and the id leave in one write.
    const firstUse = sentTogether(redis, () => {
      beside?.(verified.principal);
      return redis.set(`gw:assertion:${verified.jti}`, "1", "EX", USED_TTL_SECONDS, "NX");
    }).then((fresh) => {
      if (fresh !== "OK") throw new InvalidAssertion("already used");
    });
    return { verified, firstUse };
  }

  /** The principal, if the assertion is genuine, fresh and made for exactly this request (not whether it was used). */
  async verify(
    assertion: string,
    request: AssertedRequest,
  ): Promise<{ principal: Principal; jti: string; admission?: Admission }> {
    const payload = this.claimsOf(assertion);
    if (
      payload.htm !== request.method ||
      payload.htu_sha256 !== pathDigest(request.path) ||
      payload.rid !== request.requestId
    ) {
      throw new InvalidAssertion("assertion was made for another request");
    }
    const limits = payload.lim;
    return {
      jti: String(payload.jti),
      ...(limits && typeof limits === "object" ? { admission: { limits: limits as Limits } } : {}),
      principal: {
        org: String(payload.org),
        user: String(payload.sub),
        keyId: String(payload.key_id),
        permissions: payload.permissions as Permission[],
        ...(Array.isArray(payload.models) ? { models: payload.models.map(String) } : {}),
        ...(payload.cache === "principal" || payload.cache === "key" ? { cache: payload.cache } : {}),
        credential: payload.credential === "jwt" ? "jwt" : "api_key",
        onBehalfOf: payload.obo === true,
        // An assertion without the claim (a gateway from before it) is read as `obo` said.
        endUser: typeof payload.eu === "boolean" ? payload.eu : payload.obo === true,
      },
    };
  }
}

/** The shared secret: configured, or for development one kept in `file`, which gateway and service share. */
export async function assertionSecret(
  configured: string | undefined,
  file: string,
  logger: Logger,
): Promise<string> {
  return configured ?? developmentSecret(file, logger, "internal assertions", "INTERNAL_ASSERTION_SECRET");
}
