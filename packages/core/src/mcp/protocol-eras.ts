/**
 * The two eras of the MCP protocol the proxy serves at one URL (ADR 0024):
 * - legacy (`2025-11-25`, `2025-06-18`): an `initialize` handshake, then
 *   requests that carry only the `MCP-Protocol-Version` header;
 * - modern (`2026-07-28`): no handshake; every request carries its version
 *   and the client's capabilities in `params._meta`, and mirrors its method
 *   and name into the `Mcp-Method` and `Mcp-Name` headers, which a server
 *   must check against the body (SEP-2243, SEP-2575).
 * A request is modern when its `_meta` claims a version or its
 * `MCP-Protocol-Version` header names a modern one; everything that decides
 * (authorization, tool roles, audit) is the same for both.
 */

/** Handshake-based versions; the first is offered to a client that asks for another. */
export const LEGACY_PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18"] as const;
/** Versions with per-request metadata and no handshake. */
export const MODERN_PROTOCOL_VERSIONS = ["2026-07-28"] as const;
/** Every version the proxy speaks, newest first: what `server/discover` and a version refusal list. */
export const PROTOCOL_VERSIONS = [...MODERN_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS] as const;

export const META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion";
export const META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
export const META_SERVER_INFO = "io.modelcontextprotocol/serverInfo";

/** The specification's error codes of the modern era (schema `HEADER_MISMATCH`, `UNSUPPORTED_PROTOCOL_VERSION`). */
export const HEADER_MISMATCH = -32020;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

export const isModernVersion = (v: unknown): v is string =>
  typeof v === "string" && (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(v);
export const isLegacyVersion = (v: unknown): v is string =>
  typeof v === "string" && (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(v);

/** A refusal of a modern request before any method runs: its HTTP status and its JSON-RPC error. */
export class EraRefusal extends Error {
  readonly status: number;
  readonly code: number;
  readonly data: unknown;
  constructor(status: number, code: number, message: string, data?: unknown) {
    super(message);
    this.status = status;
    this.code = code;
    this.data = data;
  }
}

interface Message {
  method?: unknown;
  params?: unknown;
}

/** The version a message's `_meta` claims, if it claims one. */
export function claimedVersion(message: Message): unknown {
  const params = message.params;
  if (!params || typeof params !== "object") return undefined;
  const meta = (params as { _meta?: unknown })._meta;
  if (!meta || typeof meta !== "object") return undefined;
  return (meta as Record<string, unknown>)[META_PROTOCOL_VERSION];
}

/** Whether a request speaks the modern era: a `_meta` version claim, or a modern version header. */
export function isModernRequest(headerVersion: string | undefined, message: Message): boolean {
  return claimedVersion(message) !== undefined || isModernVersion(headerVersion);
}

/** The sentinel form of a header value that is not plain ASCII (`=?base64?…?=`), decoded. */
export function decodeHeaderValue(value: string): string {
  const m = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value);
  return m ? Buffer.from(m[1] ?? "", "base64").toString("utf8") : value;
}

const mismatch = (message: string) => new EraRefusal(400, HEADER_MISMATCH, `Header mismatch: ${message}`);

/**
 * Checks a modern request's headers against its body, as the specification's
 * server validation requires, and its version: throws the refusal the
 * specification names (`400` with `-32020` HeaderMismatch, or with `-32022`
 * UnsupportedProtocolVersion listing what is supported).
 */
export function validateModernRequest(
  headers: Record<string, string | string[] | undefined>,
  message: Message,
) {
  const one = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v.join(",") : v;
  };
  const headerVersion = one("mcp-protocol-version");
  const claimed = claimedVersion(message);
  if (headerVersion === undefined) throw mismatch("the MCP-Protocol-Version header is missing");
  if (claimed !== headerVersion)
    throw mismatch(
      `MCP-Protocol-Version header value '${headerVersion}' does not match body value '${typeof claimed === "string" ? claimed : String(claimed ?? "")}' (params._meta["${META_PROTOCOL_VERSION}"])`,
    );
  if (!isModernVersion(claimed))
    throw new EraRefusal(400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {
      supported: [...PROTOCOL_VERSIONS],
      requested: claimed,
    });
  const method = one("mcp-method");
  if (method === undefined) throw mismatch("the Mcp-Method header is missing");
  if (method !== message.method)
    throw mismatch(
      `Mcp-Method header value '${method}' does not match body value '${String(message.method)}'`,
    );
  const params = (message.params ?? {}) as Record<string, unknown>;
  const nameSource =
    message.method === "tools/call" || message.method === "prompts/get"
      ? params.name
      : message.method === "resources/read"
        ? params.uri
        : undefined;
  if (nameSource !== undefined || message.method === "tools/call") {
    const name = one("mcp-name");
    if (name === undefined) throw mismatch("the Mcp-Name header is missing");
    const decoded = decodeHeaderValue(name);
    if (decoded !== nameSource)
      throw mismatch(`Mcp-Name header value '${name}' does not match body value '${String(nameSource)}'`);
  }
  const meta = (params._meta ?? {}) as Record<string, unknown>;
  const capabilities = meta[META_CLIENT_CAPABILITIES];
  if (!capabilities || typeof capabilities !== "object" || Array.isArray(capabilities))
    throw new EraRefusal(
      400,
      -32602,
      `Invalid params: params._meta["${META_CLIENT_CAPABILITIES}"] must be an object (the client's capabilities for this request)`,
    );
}

/** A header value as the specification's value encoding sends it: plain when safe, else the Base64 sentinel. */
export function encodeHeaderValue(value: string): string {
  const plain = /^[\x20-\x7e]*$/.test(value) && value.trim() === value && !/^=\?base64\?.*\?=$/.test(value);
  return plain ? value : `=?base64?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

/** The `_meta` of a modern request the gateway makes upstream: no client capabilities (it runs no sampling, elicitation or roots). */
export const gatewayRequestMeta = (version: string) => ({
  [META_PROTOCOL_VERSION]: version,
  "io.modelcontextprotocol/clientInfo": { name: "llm-authz-gateway", version: "0.1.0" },
  [META_CLIENT_CAPABILITIES]: {},
});
