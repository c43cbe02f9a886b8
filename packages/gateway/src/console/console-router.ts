import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, extname, join } from "node:path";
import type { Clock } from "@gw/core/clock";
import { forbidden, unauthorized } from "@gw/core/errors";
import { RouteLabels, routesOf } from "@gw/core/http";
import type { Logger } from "@gw/core/logger";
import type { Permission } from "@gw/core/permissions";
import express, { type Request, type RequestHandler, type Response, Router } from "express";
import type { ApiKeyLookup } from "../api-keys/lookup.ts";
import { type ApiKeyRecord, keyUsable } from "../api-keys/types.ts";
import { SERVICE_ROUTES } from "../forward/service-routes.ts";
import type { ConsoleSignInOutcome, GatewayMetrics } from "../metrics.ts";
import { type ConsolePage, consoleShell, signInPage } from "./pages.ts";
import { type ConsoleSession, type ConsoleSessions, sameToken } from "./sessions.ts";
import { type SignInAttempt, SignInLimited, type SignInLimits } from "./sign-in-limits.ts";

declare global {
  namespace Express {
    interface Locals {
      /** Set by the admin console when it lets a request into the API on its session's key (already checked). */
      consoleSession?: ConsoleSession;
    }
  }
}

export const SESSION_COOKIE = "gw_console";
/** Ties the sign-in form to the browser that loaded it (login CSRF): a random value in a cookie and in the form. */
const SIGN_IN_COOKIE = "gw_console_signin";
export const CSRF_HEADER = "x-csrf-token";
export const CONSOLE_PERMISSION: Permission = "admin:console";

export interface ConsoleDeps {
  keys: ApiKeyLookup;
  sessions: ConsoleSessions;
  /** Failed sign-ins counted per client address and per organization (429 past them). */
  signInLimits: SignInLimits;
  metrics: Pick<GatewayMetrics, "consoleSignIns">;
  /** The gateway's API router; the console enters it after authentication, as the session's key. */
  api: RequestHandler;
  /** The gateway's public URL: cookies are `Secure` when it is https (or the request came over TLS). */
  publicUrl: string;
  logger: Logger;
  /** Its wall time decides whether a key has expired. */
  clock: Clock;
}

/**
 * Headers of every console answer: a CSP with no inline script (and no
 * framing), no MIME sniffing, and a referrer policy under which Chromium's
 * own form posts still carry their origin.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader("Content-Security-Policy", CONSOLE_CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "same-origin");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
  res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
  next();
};

export function cookiesOf(req: Request): Map<string, string> {
  const found = new Map<string, string>();
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) found.set(part.slice(0, eq).trim(), decodeURIComponent(part.slice(eq + 1).trim()));
  }
  return found;
}

/**
 * A state-changing request must come from the console's own origin: its
 * `Origin` is the gateway's public URL's, or the one the request was
 * addressed to; and `Sec-Fetch-Site`, when sent, says same-origin.
 */
function assertSameOrigin(req: Request, publicOrigin: string): void {
  const origin = req.get("origin");
  const own = `${req.protocol}://${req.get("host")}`;
  if (!origin || (origin !== own && origin !== publicOrigin))
    throw forbidden("Refused: the request did not come from the console's own origin");
  const site = req.get("sec-fetch-site");
  if (site && site !== "same-origin")
    throw forbidden("Refused: the request did not come from the console's own origin");
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** What the browser loads from packages, served from `node_modules`, never from a CDN. */
function vendorFiles(): Map<string, { body: Buffer; type: string }> {
  const require = createRequire(import.meta.url);
  const js = "text/javascript; charset=utf-8";
  const files: [string, string, string][] = [
    ["preact.mjs", join(dirname(require.resolve("preact")), "preact.mjs"), js],
    ["htm.mjs", join(dirname(require.resolve("htm")), "htm.mjs"), js],
    ["chart.umd.min.js", join(dirname(require.resolve("chart.js")), "chart.umd.min.js"), js],
  ];
  return new Map(files.map(([name, path, type]) => [name, { body: readFileSync(path), type }]));
}

/** The console's own scripts and styles: every `.js` and `.css` file of `public/`, as the browser loads them (no build step). */
function assetFiles(): Map<string, { body: Buffer; type: string }> {
  const dir = join(import.meta.dirname, "public");
  const types: Record<string, string> = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
  };
  return new Map(
    readdirSync(dir).flatMap((name): [string, { body: Buffer; type: string }][] => {
      const type = types[extname(name)];
      return type ? [[name, { body: readFileSync(join(dir, name)), type }]] : [];
    }),
  );
}

const PAGES: ConsolePage[] = ["keys", "usage", "access", "audit", "evals", "guardrails", "tools"];

/**
 * The admin console under `/admin/`: sign-in exchanges an API key with
 * `admin:console` for a server-side session (docs/adr/0013-admin-console.md);
 * its pages are one HTML shell and ES modules that call the gateway's own JSON
 * API through `/admin/api/v1/…`, which enters the same API router as the
 * session's key, so every rule is the API's own.
 */
export function createConsoleRouter(deps: ConsoleDeps): Router {
  const router = Router();
  const vendor = vendorFiles();
  const assets = assetFiles();
  const secureCookies = deps.publicUrl.startsWith("https:");
  const publicOrigin = new URL(deps.publicUrl).origin;
  let mcpRoutes: boolean | undefined;

  router.use(securityHeaders);

  const cookie = (req: Request, res: Response, name: string, value: string, maxAgeMs?: number) => {
    res.cookie(name, value, {
      httpOnly: true,
      sameSite: "strict",
      secure: secureCookies || req.secure,
      path: "/admin",
      ...(maxAgeMs !== undefined ? { maxAge: maxAgeMs } : {}),
    });
  };

  /** The key a session stands for, as it is now: a revoked key, or one without the permission, ends its sessions. */
  const liveKey = async (session: ConsoleSession): Promise<ApiKeyRecord | undefined> => {
    const key = await deps.keys.findById(session.keyId);
    if (key && mayUseConsole(key, deps.clock.wall())) return key;
    await deps.sessions.endAllOf(session.keyId);
    return undefined;
  };

  const sessionOf = async (
    req: Request,
  ): Promise<{ session: ConsoleSession; key: ApiKeyRecord; id: string } | undefined> => {
    const id = cookiesOf(req).get(SESSION_COOKIE);
    if (!id || id.length > 100) return undefined;
    const session = await deps.sessions.touch(id);
    if (!session) return undefined;
    const key = await liveKey(session);
    return key ? { session, key, id } : undefined;
  };

  const sendFile = (file: { body: Buffer; type: string } | undefined, res: Response, next: () => void) => {
    if (!file) return next();
    res.setHeader("Content-Type", file.type);
    res.setHeader("Cache-Control", "no-cache");
    res.send(file.body);
  };
  router.get("/vendor/:file", (req, res, next) => sendFile(vendor.get(req.params.file), res, next));
  router.get("/assets/:file", (req, res, next) => sendFile(assets.get(req.params.file), res, next));

  /** The sign-in form, with a fresh token in its cookie and the form. */
  const sendSignInPage = (
    req: Request,
    res: Response,
    page: Omit<Parameters<typeof signInPage>[0], "csrf">,
  ) => {
    const token = cryptoToken();
    cookie(req, res, SIGN_IN_COOKIE, token, 3_600_000);
    res.setHeader("Cache-Control", "no-store");
    res.type("html").send(signInPage({ csrf: token, ...page }));
  };

  router.get("/sign-in", async (req, res) => {
    if (await sessionOf(req)) return res.redirect(303, "/admin/");
    const failed = typeof req.query.failed === "string" ? req.query.failed : undefined;
    sendSignInPage(req, res, { failed, signedOut: req.query.signed_out === "1" });
  });

  const form = express.urlencoded({ extended: false, limit: "4kb", parameterLimit: 10 });
  const signedIn = (outcome: ConsoleSignInOutcome) => deps.metrics.consoleSignIns.inc({ outcome });

  /**
   * Runs a step of a sign-in that may be refused for too many failed
   * attempts: a browser gets the sign-in page saying so, with the 429 and
   * its `Retry-After`; any other client the catalogue's 429.
   */
  const unlessLimited = async <T>(
    req: Request,
    res: Response,
    step: () => Promise<T>,
    org?: string,
  ): Promise<T | undefined> => {
    try {
      return await step();
    } catch (err) {
      if (!(err instanceof SignInLimited)) throw err;
      signedIn(err.limit === "address" ? "limited_address" : "limited_organization");
      deps.logger.warn(
        { limit: err.limit, address: req.ip, org, retryAfterSeconds: err.retryAfterSeconds },
        "console sign-in refused: too many failed attempts",
      );
      if (req.accepts(["json", "html"]) !== "html") throw err;
      res.status(429).set(err.headers);
      sendSignInPage(req, res, { limitedForSeconds: err.retryAfterSeconds });
      return undefined;
    }
  };

  router.post("/sign-in", form, async (req, res) => {
    assertSameOrigin(req, publicOrigin);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const expected = cookiesOf(req).get(SIGN_IN_COOKIE);
    if (!expected || !sameToken(body.csrf, expected)) throw forbidden("Refused: missing or wrong CSRF token");
    // Counted before the key is looked up: too many failures from this address, and nothing more is tried.
    const attempt = await unlessLimited<SignInAttempt>(req, res, () =>
      deps.signInLimits.attempt(req.ip ?? req.socket.remoteAddress ?? "unknown"),
    );
    if (!attempt) return;
    const secret = typeof body.key === "string" ? body.key.trim() : "";
    const key = secret && secret.length <= 256 ? await deps.keys.findBySecret(secret) : undefined;
    if (key && !(await unlessLimited(req, res, () => attempt.naming(key.org).then(() => true), key.org)))
      return;
    if (!key || !keyUsable(key, deps.clock.wall())) {
      signedIn("invalid_key");
      return res.redirect(303, "/admin/sign-in?failed=invalid");
    }
    if (!key.permissions.includes(CONSOLE_PERMISSION)) {
      signedIn("missing_permission");
      return res.redirect(303, "/admin/sign-in?failed=permission");
    }
    await attempt.succeeded();
    signedIn("signed_in");
    const { id, session } = await deps.sessions.create({ keyId: key.id, org: key.org, user: key.owner });
    cookie(req, res, SESSION_COOKIE, id);
    res.clearCookie(SIGN_IN_COOKIE, { path: "/admin" });
    deps.logger.info({ keyId: key.id, org: session.org }, "console session started");
    res.redirect(303, "/admin/keys");
  });

  router.post("/sign-out", form, async (req, res) => {
    assertSameOrigin(req, publicOrigin);
    const id = cookiesOf(req).get(SESSION_COOKIE);
    const current = await sessionOf(req);
    if (current) {
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (!sameToken(body.csrf ?? req.get(CSRF_HEADER), current.session.csrf))
        throw forbidden("Refused: missing or wrong CSRF token");
    }
    if (id) await deps.sessions.end(id);
    res.clearCookie(SESSION_COOKIE, { path: "/admin" });
    res.redirect(303, "/admin/sign-in?signed_out=1");
  });

  const shell: RequestHandler = async (req, res) => {
    const current = await sessionOf(req);
    if (!current) {
      res.clearCookie(SESSION_COOKIE, { path: "/admin" });
      return res.redirect(303, "/admin/sign-in");
    }
    mcpRoutes ??= hasMcpRoutes(req.app as express.Express);
    res.setHeader("Cache-Control", "no-store");
    res.type("html").send(
      consoleShell({
        csrf: current.session.csrf,
        org: current.key.org,
        user: current.key.owner,
        keyId: current.key.id,
        permissions: current.key.permissions,
        mcp: mcpRoutes,
      }),
    );
  };
  router.get("/", shell);
  for (const page of PAGES) router.get(`/${page}`, shell);

  // The API, as the session's key: the same router, rules and answers as with `Authorization: Bearer`.
  router.use("/api/v1", async (req, res, next) => {
    const current = await sessionOf(req);
    if (!current) throw unauthorized("The console session has ended; sign in again");
    if (!SAFE_METHODS.has(req.method)) {
      assertSameOrigin(req, publicOrigin);
      if (!sameToken(req.get(CSRF_HEADER), current.session.csrf))
        throw forbidden("Refused: missing or wrong CSRF token");
    }
    res.setHeader("Cache-Control", "no-store");
    res.locals.apiKey = current.key;
    res.locals.consoleSession = current.session;
    req.originalUrl = `/api/v1${req.url}`;
    deps.api(req, res, next);
  });

  return router;
}

function cryptoToken(): string {
  return (
    globalThis.crypto.randomUUID().replaceAll("-", "") + globalThis.crypto.randomUUID().replaceAll("-", "")
  );
}

/** Active, unexpired, and holding `admin:console`. */
export function mayUseConsole(key: ApiKeyRecord, now: number): boolean {
  return keyUsable(key, now) && key.permissions.includes(CONSOLE_PERMISSION);
}

/** Whether the gateway serves the MCP API (helper routes of issue 29); the console shows tool servers only then. */
export function hasMcpRoutes(app: express.Express): boolean {
  const labels = new RouteLabels([...routesOf(app), ...SERVICE_ROUTES]);
  return labels.label("GET", "/api/v1/mcp/servers") !== "unmatched";
}
