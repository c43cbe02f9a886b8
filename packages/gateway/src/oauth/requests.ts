import { createHash, randomBytes } from "node:crypto";
import type { RedisClient } from "@gw/core/redis";

/** An authorization request between its pages (sign-in, consent), validated when it arrived. */
export interface PendingAuthorization {
  clientId: string;
  clientName: string | null;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: string;
  /** The MCP server the resource is the proxy of. */
  serverId: string;
  scope: string;
  /** Set by the sign-in: who the tokens will act as. */
  signedIn?: { org: string; user: string; keyId: string };
  /** Set by the sign-in: the consent form's token, also in the browser's cookie (the consent is that browser's). */
  consentToken?: string;
  /**
   * Set when the browser was sent to the organization's OpenID provider: its
   * issuer, the round trip's nonce and PKCE verifier, and the token of the
   * browser's cookie that the callback must bring back.
   */
  oidc?: { issuer: string; nonce: string; codeVerifier: string; browser: string };
}

/** What an authorization code stands for, until it is redeemed once. */
export interface CodeGrant {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  resource: string;
  scope: string;
  org: string;
  user: string;
  keyId: string;
}

/** How long an authorization request may take from its first page to its consent, in seconds. */
const PENDING_TTL_SECONDS = 600;
/** How long an authorization code may wait for its exchange, in seconds (RFC 6749 4.1.2: at most 10 minutes). */
const CODE_TTL_SECONDS = 60;

const digest = (value: string) => createHash("sha256").update(value).digest("base64url");
const random = () => randomBytes(32).toString("base64url");

/**
 * Authorization requests in progress and authorization codes, in Redis: short
 * lived, shared by every replica, each code kept by its SHA-256 and taken with
 * GETDEL, so it is redeemed once even by two replicas at the same moment.
 */
export class AuthorizationRequests {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async begin(request: PendingAuthorization): Promise<string> {
    const id = random();
    await this.redis.set(pendingKey(id), JSON.stringify(request), "EX", PENDING_TTL_SECONDS);
    return id;
  }

  async get(id: string): Promise<PendingAuthorization | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const stored = await this.redis.get(pendingKey(id));
    return stored ? (JSON.parse(stored) as PendingAuthorization) : undefined;
  }

  /** Replaces the request's state, keeping its deadline; false when it has ended meanwhile. */
  async update(id: string, request: PendingAuthorization): Promise<boolean> {
    return (await this.redis.set(pendingKey(id), JSON.stringify(request), "KEEPTTL", "XX")) === "OK";
  }

  /** Ends the request: the one caller that gets it back decides it (a consent submitted twice is decided once). */
  async finish(id: string): Promise<PendingAuthorization | undefined> {
    const stored = await this.redis.getdel(pendingKey(id));
    return stored ? (JSON.parse(stored) as PendingAuthorization) : undefined;
  }

  async issueCode(grant: CodeGrant): Promise<string> {
    const code = random();
    await this.redis.set(codeKey(code), JSON.stringify(grant), "EX", CODE_TTL_SECONDS);
    return code;
  }

  /** The code's grant, once: a second redemption finds nothing. */
  async redeemCode(code: string): Promise<CodeGrant | undefined> {
    if (code.length > 128) return undefined;
    const stored = await this.redis.getdel(codeKey(code));
    return stored ? (JSON.parse(stored) as CodeGrant) : undefined;
  }
}

const pendingKey = (id: string) => `oauth:authorization:${digest(id)}`;
const codeKey = (code: string) => `oauth:code:${digest(code)}`;
