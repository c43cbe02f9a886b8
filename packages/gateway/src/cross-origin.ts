import { serverOfProxyUrl } from "@gw/core/mcp";
import type { RequestHandler } from "express";
import { OAUTH_PATHS } from "./oauth/metadata.ts";

/** What a page of another origin may send: a bearer token, JSON or a form, and MCP's headers. */
const ALLOWED_HEADERS = [
  "Authorization",
  "Content-Type",
  "Accept",
  "MCP-Protocol-Version",
  "Mcp-Session-Id",
  "Mcp-Method",
  "Mcp-Name",
  "Last-Event-ID",
  "X-Request-Id",
].join(", ");

/** What it may read of an answer besides the simple headers: where to sign in (a 401's), MCP's, the request id, when to come back. */
const EXPOSED_HEADERS = [
  "WWW-Authenticate",
  "Mcp-Session-Id",
  "MCP-Protocol-Version",
  "X-Request-Id",
  "Retry-After",
].join(", ");

/** The OAuth endpoints a client calls with `fetch`; the authorization endpoint and the callback are pages it opens. */
const OAUTH_FETCHED: ReadonlySet<string> = new Set([
  OAUTH_PATHS.token,
  OAUTH_PATHS.register,
  OAUTH_PATHS.revoke,
]);

/** Whether browser-based MCP clients call `path` across origins. */
export function crossOriginPath(path: string): boolean {
  return (
    path.startsWith("/.well-known/") || OAUTH_FETCHED.has(path) || serverOfProxyUrl("", path) !== undefined
  );
}

/**
 * Cross-origin access (CORS) for what browser-based MCP clients call with `fetch`: the MCP Inspector's
 * page and web hosts discover, register, exchange codes and call tools from another origin. That is
 * the discovery documents (`/.well-known/…`), registration, the token and revocation endpoints and
 * the MCP proxy, for any origin and never with credentials: these take a bearer token or a client's
 * form, never a cookie, so a page can do with them nothing a server could not. The API, the console,
 * and the sign-in and consent pages answer no other origin. The headers are sent whether or not the
 * request says its origin, so a shared cache keeps one answer for all. A preflight (`OPTIONS`) is
 * answered where every `OPTIONS` is (`useRequestBasics`): 204, with these headers.
 */
export const crossOriginForMcpClients: RequestHandler = (req, res, next) => {
  if (!crossOriginPath(req.path)) return next();
  res.setHeader("Access-Control-Allow-Origin", "*");
  if (req.method === "OPTIONS") {
    res.setHeader("Access-Control-Allow-Methods", "GET, POST, DELETE");
    res.setHeader("Access-Control-Allow-Headers", ALLOWED_HEADERS);
    res.setHeader("Access-Control-Max-Age", "600");
  } else {
    res.setHeader("Access-Control-Expose-Headers", EXPOSED_HEADERS);
  }
  next();
};
