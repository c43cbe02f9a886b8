import { randomBytes } from "node:crypto";
import { entryBound } from "@gw/core/bounded-cache";
import type { Clock } from "@gw/core/clock";
import { OAuthError } from "@gw/core/errors";
import { fetchGuardedJson, type UpstreamPolicy, UpstreamRefused } from "@gw/core/mcp";
import type { Postgres } from "@gw/core/postgres";
import { LRUCache } from "lru-cache";

/** An OAuth client as the authorization server knows it: registered (RFC 7591) or described by its metadata document. */
export interface OAuthClient {
  client_id: string;
  client_name: string | null;
  redirect_uris: string[];
  /** Its id is the https URL of a Client ID Metadata Document. */
  metadataDocument: boolean;
}

/** RFC 7591's registration response for a public client. */
export interface RegistrationResponse {
  client_id: string;
  client_id_issued_at: number;
  client_name?: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  token_endpoint_auth_method: "none";
}

const MAX_REDIRECT_URIS = 10;
const MAX_URI_LENGTH = 2_000;
const MAX_NAME_LENGTH = 200;
const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Schemes a browser runs, renders or hands to another protocol itself: never
 * where a code is sent. Every other scheme of two characters or more is a
 * native client's own (RFC 8252 7.1: `cursor://…`, `vscode://…`,
 * `com.example.app:/…`); a one-letter one would be a Windows drive.
 */
const BROWSER_SCHEMES = new Set([
  "javascript:",
  "vbscript:",
  "data:",
  "blob:",
  "file:",
  "filesystem:",
  "about:",
  "view-source:",
  "chrome:",
  "chrome-extension:",
  "moz-extension:",
  "intent:",
  "ws:",
  "wss:",
  "ftp:",
  "mailto:",
  "tel:",
  "sms:",
  "urn:",
]);

/**
 * Why `uri` may not be a redirect URI, or undefined when it may: https; http
 * to a loopback host (a native client's local listener, RFC 8252 7.3); or a
 * native client's private-use scheme (RFC 8252 7.1), never one a browser
 * handles itself (`javascript:`, `data:`, `file:` …). No fragment, no
 * credentials. The one rule for registration, metadata documents and
 * authorization requests.
 */
export function redirectUriRefusal(uri: unknown): string | undefined {
  if (typeof uri !== "string" || uri.length === 0 || uri.length > MAX_URI_LENGTH)
    return `a redirect URI is a string of 1 to ${MAX_URI_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return `${uri} is not a URL`;
  }
  if (url.hash || uri.includes("#")) return `${uri} must not have a fragment`;
  if (url.username || url.password) return `${uri} must not carry credentials`;
  if (url.protocol === "https:") return undefined;
  if (url.protocol === "http:")
    return LOOPBACK_HOSTS.has(url.hostname)
      ? undefined
      : `${uri} must be https: http only to localhost, 127.0.0.1 or [::1]`;
  if (BROWSER_SCHEMES.has(url.protocol) || url.protocol.length < 3)
    return `${uri} must be https, http to a loopback address, or a native application's own scheme`;
  if (url.host === "" && (url.pathname === "" || url.pathname === "/"))
    return `${uri} names no place in the application`;
  return undefined;
}

/** Where a redirect URI sends the browser, as the consent page names it: a web origin's host, or a native application's scheme (and host). */
export function redirectTarget(uri: string): string {
  const url = new URL(uri);
  if (url.protocol === "https:" || url.protocol === "http:") return url.host;
  return url.host ? `${url.protocol}//${url.host}` : url.protocol;
}

/** The CSP `form-action` source that lets the consent form's answer redirect to `uri`: its origin, or a native scheme as a whole. */
export function redirectFormSource(uri: string): string {
  const url = new URL(uri);
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : url.protocol;
}

/**
 * Whether `requested` is one of the client's redirect URIs: exactly, except
 * that a loopback URI's port may differ (RFC 8252 7.3: a native client
 * listens on whatever port it is given).
 */
export function redirectUriMatches(registered: readonly string[], requested: string): boolean {
  if (registered.includes(requested)) return true;
  let want: URL;
  try {
    want = new URL(requested);
  } catch {
    return false;
  }
  if (want.protocol !== "http:" || !LOOPBACK_HOSTS.has(want.hostname)) return false;
  return registered.some((r) => {
    const have = new URL(r);
    return (
      have.protocol === "http:" &&
      have.hostname === want.hostname &&
      have.pathname === want.pathname &&
      have.search === want.search
    );
  });
}

/** A client id naming a metadata document: an https URL with a path (SEP-991 / draft-ietf-oauth-client-id-metadata-document). */
export function isMetadataDocumentId(clientId: string): boolean {
  if (!clientId.startsWith("https://")) return false;
  try {
    const url = new URL(clientId);
    return url.pathname !== "/" && !url.hash && !url.username && !url.password;
  } catch {
    return false;
  }
}

export interface OAuthClientsOptions {
  /** The policy metadata documents are fetched through (no private addresses unless it allows them). */
  policy: UpstreamPolicy;
  clock: Clock;
  /** `MCP_OAUTH_CLIENT_METADATA_CACHE_SIZE`: documents kept. */
  cacheSize: number;
  /** `MCP_OAUTH_CLIENT_METADATA_CACHE_TTL`: how long a fetched document is used, in milliseconds. */
  cacheTtlMs: number;
  /** Deadline of one document fetch, in milliseconds. */
  timeoutMs: number;
  /** Certificates trusted for document hosts instead of the system's (tests only). */
  ca?: string | undefined;
  /** `MCP_OAUTH_MAX_UNUSED_CLIENTS`: registrations not yet used (and not yet expired) beyond which registration is refused. */
  maxUnusedClients: number;
  /** Told of each metadata document fetched (not of those the cache answered): accepted, or refused as invalid_client. */
  onDocument?: ((outcome: "accepted" | "refused") => void) | undefined;
}

/**
 * A registration no token was ever issued to is forgotten a day after it was
 * made (refused from then on, deleted by the sweep): registration is open to
 * anyone, and a client registers right before its user signs in.
 */
export const UNUSED_CLIENT_TTL_SECONDS = 86_400;

/** Largest metadata document read, in bytes. */
const MAX_DOCUMENT_BYTES = 65_536;

/** Registered clients in PostgreSQL (`oauth_clients`) and metadata documents fetched on demand, cached. */
export class OAuthClients {
  private readonly db: Postgres;
  private readonly options: OAuthClientsOptions;
  private readonly documents: LRUCache<string, OAuthClient>;

  constructor(db: Postgres, options: OAuthClientsOptions) {
    this.db = db;
    this.options = options;
    this.documents = new LRUCache({
      ...entryBound(options.cacheSize),
      ttl: options.cacheTtlMs,
      ttlResolution: 0,
      perf: { now: () => options.clock.wall() },
    });
  }

  /** Dynamic client registration of a public client (RFC 7591); every field the server does not use is ignored. */
  async register(metadata: unknown): Promise<RegistrationResponse> {
    if (!metadata || typeof metadata !== "object" || Array.isArray(metadata))
      throw new OAuthError("invalid_client_metadata", "The registration must be a JSON object");
    const m = metadata as Record<string, unknown>;
    const redirectUris = checkRedirectUris(m.redirect_uris, "invalid_redirect_uri");
    const name = clientName(m.client_name);
    const method = m.token_endpoint_auth_method;
    if (method !== undefined && method !== "none")
      throw new OAuthError(
        "invalid_client_metadata",
        "Only public clients are registered: token_endpoint_auth_method must be 'none'",
      );
    for (const [field, allowed] of [
      ["grant_types", ["authorization_code", "refresh_token"]],
      ["response_types", ["code"]],
    ] as const) {
      const value = m[field];
      if (value === undefined) continue;
      if (!Array.isArray(value) || !value.every((v) => (allowed as readonly string[]).includes(v)))
        throw new OAuthError("invalid_client_metadata", `${field} may hold only ${allowed.join(", ")}`);
    }
    const clientId = `mcpc_${randomBytes(16).toString("hex")}`;
    const issuedAt = this.now();
    // The count and the insert it guards under one lock: concurrent registrations cannot pass the cap together.
    await this.db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtext('oauth_clients_registration'))");
      const { rows } = await tx.query<{ n: string }>(
        "SELECT count(*) AS n FROM oauth_clients WHERE used_at IS NULL AND created_at > $1",
        [issuedAt - UNUSED_CLIENT_TTL_SECONDS],
      );
      if (Number(rows[0]?.n ?? 0) >= this.options.maxUnusedClients)
        throw new OAuthError(
          "temporarily_unavailable",
          "Too many clients are registered and not yet used; try again later",
        );
      await tx.query(
        "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at) VALUES ($1, $2, $3, $4)",
        [clientId, name, JSON.stringify(redirectUris), issuedAt],
      );
    });
    return {
      client_id: clientId,
      client_id_issued_at: issuedAt,
      ...(name !== null ? { client_name: name } : {}),
      redirect_uris: redirectUris,
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  /** The client `clientId` names: registered, or its metadata document (fetched, validated, cached); undefined if unknown. */
  async find(clientId: string): Promise<OAuthClient | undefined> {
    if (isMetadataDocumentId(clientId)) return this.fromDocument(clientId);
    if (!/^mcpc_[0-9a-f]{32}$/.test(clientId)) return undefined;
    const { rows } = await this.db.query<{
      client_id: string;
      client_name: string | null;
      redirect_uris: string[];
    }>(
      `SELECT client_id, client_name, redirect_uris FROM oauth_clients
        WHERE client_id = $1 AND (used_at IS NOT NULL OR created_at > $2)`,
      [clientId, this.now() - UNUSED_CLIENT_TTL_SECONDS],
    );
    const row = rows[0];
    return row ? { ...row, metadataDocument: false } : undefined;
  }

  private now = () => Math.floor(this.options.clock.wall() / 1000);

  /** A token was issued to the client: its registration no longer expires unused. */
  async markUsed(clientId: string): Promise<void> {
    if (isMetadataDocumentId(clientId)) return;
    await this.db.query("UPDATE oauth_clients SET used_at = $2 WHERE client_id = $1 AND used_at IS NULL", [
      clientId,
      this.now(),
    ]);
  }

  /** Deletes registrations never used within their day; how many. */
  async sweep(): Promise<number> {
    const { rowCount } = await this.db.query(
      "DELETE FROM oauth_clients WHERE used_at IS NULL AND created_at <= $1",
      [this.now() - UNUSED_CLIENT_TTL_SECONDS],
    );
    return rowCount ?? 0;
  }

  private async fromDocument(url: string): Promise<OAuthClient> {
    const cached = this.documents.get(url);
    if (cached) return cached;
    try {
      const client = await this.fetchDocument(url);
      this.documents.set(url, client);
      this.options.onDocument?.("accepted");
      return client;
    } catch (err) {
      if (err instanceof OAuthError) this.options.onDocument?.("refused");
      throw err;
    }
  }

  private async fetchDocument(url: string): Promise<OAuthClient> {
    let document: unknown;
    try {
      document = await fetchGuardedJson(this.options.policy, url, {
        timeoutMs: this.options.timeoutMs,
        maxBytes: MAX_DOCUMENT_BYTES,
        ca: this.options.ca,
      });
    } catch (err) {
      if (!(err instanceof UpstreamRefused)) throw err;
      throw new OAuthError(
        "invalid_client",
        `The client metadata document ${url} was not fetched: ${err.message}`,
      );
    }
    const d = (document && typeof document === "object" ? document : {}) as Record<string, unknown>;
    if (d.client_id !== url)
      throw new OAuthError(
        "invalid_client",
        `The client metadata document at ${url} names another client_id`,
      );
    const method = d.token_endpoint_auth_method;
    if (method !== undefined && method !== "none")
      throw new OAuthError(
        "invalid_client",
        "Only public clients are supported: token_endpoint_auth_method must be 'none'",
      );
    const client: OAuthClient = {
      client_id: url,
      client_name: clientNameOr(d.client_name, "invalid_client"),
      redirect_uris: checkRedirectUris(d.redirect_uris, "invalid_client"),
      metadataDocument: true,
    };
    return client;
  }
}

function checkRedirectUris(value: unknown, code: "invalid_redirect_uri" | "invalid_client"): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_REDIRECT_URIS)
    throw new OAuthError(code, `redirect_uris must list 1 to ${MAX_REDIRECT_URIS} URIs`);
  for (const uri of value) {
    const refused = redirectUriRefusal(uri);
    if (refused) throw new OAuthError(code, `Refused redirect URI: ${refused}`);
  }
  return value as string[];
}

function clientName(value: unknown): string | null {
  return clientNameOr(value, "invalid_client_metadata");
}

function clientNameOr(value: unknown, code: "invalid_client_metadata" | "invalid_client"): string | null {
  if (value === undefined || value === null) return null;
  if (
    typeof value !== "string" ||
    value.length === 0 ||
    value.length > MAX_NAME_LENGTH ||
    /[\p{Cc}]/u.test(value)
  )
    throw new OAuthError(code, `client_name must be 1 to ${MAX_NAME_LENGTH} printable characters`);
  return value;
}
