import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";
import { errors, jwtVerify, SignJWT } from "jose";
import { developmentSecret } from "./development-secret.ts";
import { AppError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import type { Logger } from "./logger.ts";
import type { Permission } from "./permissions.ts";
import type { Principal } from "./principal.ts";

/** Header that carries the gateway's assertion of who a forwarded request acts as. */
export const ASSERTION_HEADER = "x-gateway-assertion";

/** Lifetime of an assertion: it only has to survive one hop. */
const ASSERTION_TTL_SECONDS = 30;
const ISSUER = "llm-gateway";
const AUDIENCE = "llm-gateway-service";

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
const pathDigest = (path: string) => createHash("sha256").update(path).digest("base64url");

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
  private readonly key: Uint8Array;

  constructor(secret: string) {
    if (secret.length < 32) throw new Error("the internal assertion secret must be at least 32 characters");
    this.key = new TextEncoder().encode(secret);
  }

  sign(principal: Principal, request: AssertedRequest, admission?: Admission): Promise<string> {
    return new SignJWT({
      ...(admission ? { lim: admission.limits } : {}),
      org: principal.org,
      key_id: principal.keyId,
      permissions: principal.permissions,
      ...(principal.models ? { models: principal.models } : {}),
      credential: principal.credential,
      obo: principal.onBehalfOf,
      eu: principal.endUser ?? principal.onBehalfOf,
      htm: request.method,
      htu_sha256: pathDigest(request.path),
      rid: request.requestId,
    })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject(principal.user)
      .setIssuedAt()
      .setExpirationTime(`${ASSERTION_TTL_SECONDS}s`)
      .setJti(randomBytes(12).toString("base64url"))
      .sign(this.key);
  }

  /** The principal, if the assertion is genuine, fresh and made for exactly this request. */
  async verify(
    assertion: string,
    request: AssertedRequest,
  ): Promise<{ principal: Principal; jti: string; admission?: Admission }> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(assertion, this.key, {
        issuer: ISSUER,
        audience: AUDIENCE,
        algorithms: ["HS256"],
        clockTolerance: 5,
        requiredClaims: ["sub", "exp", "jti", "org", "key_id", "permissions", "htm", "htu_sha256", "rid"],
      }));
    } catch (err) {
      throw new InvalidAssertion(
        err instanceof errors.JWTExpired ? "assertion expired" : "assertion invalid",
      );
    }
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
        credential: payload.credential === "jwt" ? "jwt" : "api_key",
        onBehalfOf: payload.obo === true,
        // An assertion without the claim (a gateway from before it) is read as `obo` said.
        endUser: typeof payload.eu === "boolean" ? payload.eu : payload.obo === true,
      },
    };
  }
}

/** The assertions of a process: with the configured secret, or the development one under `dataDir`. */
export async function internalAssertions(
  configured: string | undefined,
  dataDir: string,
  logger: Logger,
): Promise<InternalAssertions> {
  return new InternalAssertions(
    await assertionSecret(configured, join(dataDir, "internal-assertion-secret"), logger),
  );
}

/** The shared secret: configured, or for development one kept in `file`, which gateway and service share. */
export async function assertionSecret(
  configured: string | undefined,
  file: string,
  logger: Logger,
): Promise<string> {
  return configured ?? developmentSecret(file, logger, "internal assertions", "INTERNAL_ASSERTION_SECRET");
}
