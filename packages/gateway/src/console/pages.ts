import { DEFAULT_PERMISSIONS, PERMISSIONS } from "@gw/core/permissions";
/** The console's two server-rendered documents. Every value goes through `escapeHtml`; no inline script. */

export type ConsolePage = "keys" | "usage" | "access" | "audit" | "evals" | "guardrails" | "tools";

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

const head = (title: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/admin/assets/app.css">
`;

const FAILURES: Record<string, string> = {
  invalid: "That API key is unknown, revoked or expired.",
  permission: "That API key lacks the admin:console permission, so it cannot sign in to the console.",
};

/** What the page says when too many sign-ins failed: the wait, in whole minutes (or seconds under one). */
function limitedMessage(seconds: number): string {
  const wait =
    seconds < 60
      ? `${seconds} second${seconds === 1 ? "" : "s"}`
      : `${Math.ceil(seconds / 60)} minute${Math.ceil(seconds / 60) === 1 ? "" : "s"}`;
  return `Too many failed sign-in attempts. Wait ${wait}, then try again.`;
}

/** The sign-in form: the key goes once, in a POST, and is exchanged for a session. */
export function signInPage(opts: {
  csrf: string;
  failed?: string | undefined;
  signedOut?: boolean | undefined;
  /** Sign-ins are refused for this many seconds more (too many failed). */
  limitedForSeconds?: number | undefined;
}): string {
  const failure =
    opts.limitedForSeconds !== undefined
      ? limitedMessage(opts.limitedForSeconds)
      : opts.failed
        ? (FAILURES[opts.failed] ?? FAILURES.invalid!)
        : undefined;
  return `${head("Sign in · Gateway admin console")}</head>
<body class="sign-in">
<main id="main">
<h1>Gateway admin console</h1>
${opts.signedOut ? '<p class="notice" role="status">You have signed out.</p>' : ""}
${failure ? `<p class="error" role="alert" id="sign-in-error">${escapeHtml(failure)}</p>` : ""}
<form method="post" action="/admin/sign-in" class="card">
<input type="hidden" name="csrf" value="${escapeHtml(opts.csrf)}">
<label for="key">API key with <code>admin:console</code></label>
<input id="key" name="key" type="password" autocomplete="off" required maxlength="256"${failure ? ' aria-describedby="sign-in-error"' : ""} autofocus>
<button type="submit">Sign in</button>
<p class="hint">The key is sent once and exchanged for a session; the browser keeps only a session cookie.</p>
</form>
</main>
</body>
</html>
`;
}

/** The signed-in shell: the ES modules render the page the path names. */
export function consoleShell(opts: {
  csrf: string;
  org: string;
  user: string;
  keyId: string;
  permissions: readonly string[];
  mcp: boolean;
}): string {
  return `${head("Gateway admin console")}<meta name="csrf-token" content="${escapeHtml(opts.csrf)}">
<script src="/admin/vendor/chart.umd.min.js" defer></script>
<script type="module" src="/admin/assets/app.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<div id="console" data-org="${escapeHtml(opts.org)}" data-user="${escapeHtml(opts.user)}" data-key-id="${escapeHtml(
    opts.keyId,
  )}" data-permissions="${escapeHtml(opts.permissions.join(" "))}" data-all-permissions="${PERMISSIONS.join(
    " ",
  )}" data-default-permissions="${DEFAULT_PERMISSIONS.join(" ")}" data-mcp="${opts.mcp ? "1" : "0"}">
<header class="top">
<span class="brand">Gateway console</span>
<span class="who">${escapeHtml(opts.user)} · ${escapeHtml(opts.org)}</span>
<form method="post" action="/admin/sign-out" class="sign-out">
<input type="hidden" name="csrf" value="${escapeHtml(opts.csrf)}">
<button type="submit">Sign out</button>
</form>
</header>
<nav id="nav" aria-label="Console"></nav>
<main id="main" tabindex="-1"><p>Loading…</p></main>
</div>
</body>
</html>
`;
}
