import { MCP_CALL } from "@gw/core/mcp";
import { escapeHtml } from "../console/pages.ts";

const head = (title: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/admin/assets/app.css">
</head>
`;

const FAILURES: Record<string, string> = {
  invalid: "That API key is unknown, revoked or expired.",
  permission: `That API key lacks the ${MCP_CALL} permission, so it cannot sign in to an MCP client.`,
  server: "That API key's user may not use this MCP server.",
};

/** The authorization server's sign-in (development: an API key, as the console's), for one authorization request. */
export function authorizeSignInPage(opts: {
  request: string;
  clientName: string;
  serverLabel: string;
  failed?: string | undefined;
}): string {
  const failure = opts.failed ? (FAILURES[opts.failed] ?? FAILURES.invalid!) : undefined;
  return `${head("Sign in · Gateway")}<body class="sign-in">
<main id="main">
<h1>Sign in to connect ${escapeHtml(opts.clientName)}</h1>
<p>${escapeHtml(opts.clientName)} asks to use the MCP server ${escapeHtml(opts.serverLabel)} through this gateway on your behalf.</p>
${failure ? `<p class="error" role="alert" id="sign-in-error">${escapeHtml(failure)}</p>` : ""}
<form method="post" action="/oauth/authorize" class="card">
<input type="hidden" name="request" value="${escapeHtml(opts.request)}">
<input type="hidden" name="step" value="sign-in">
<label for="key">API key with <code>${MCP_CALL}</code></label>
<input id="key" name="key" type="password" autocomplete="off" required maxlength="256" autofocus>
<button type="submit">Sign in</button>
<p class="hint">The key is sent once; the client never sees it, only tokens for this one MCP server.</p>
</form>
</main>
</body>
</html>
`;
}

/** The consent page: the client, the MCP server and what it will be able to do, with Allow and Deny. */
export function consentPage(opts: {
  request: string;
  consentToken: string;
  clientName: string;
  clientId: string;
  serverLabel: string;
  serverDescription: string | null;
  user: string;
  redirectHost: string;
  previouslyGrantedAt: number | undefined;
}): string {
  const earlier = opts.previouslyGrantedAt
    ? `<p class="notice">You allowed this client for this server on ${escapeHtml(new Date(opts.previouslyGrantedAt * 1000).toISOString().slice(0, 10))}.</p>`
    : "";
  return `${head("Allow access? · Gateway")}<body class="sign-in">
<main id="main">
<h1>Allow ${escapeHtml(opts.clientName)}?</h1>
${earlier}
<div class="card">
<p><strong>${escapeHtml(opts.clientName)}</strong> (<code>${escapeHtml(opts.clientId)}</code>) will act as <strong>${escapeHtml(opts.user)}</strong> on the MCP server <strong>${escapeHtml(opts.serverLabel)}</strong>${opts.serverDescription ? `: ${escapeHtml(opts.serverDescription)}` : ""}.</p>
<p>It will be able to list and call the tools of this server that your role allows (<code>${MCP_CALL}</code>), and nothing else of this gateway, until you or an administrator revoke it.</p>
<p>After your answer you return to <code>${escapeHtml(opts.redirectHost)}</code>.</p>
<form method="post" action="/oauth/authorize">
<input type="hidden" name="request" value="${escapeHtml(opts.request)}">
<input type="hidden" name="consent" value="${escapeHtml(opts.consentToken)}">
<input type="hidden" name="step" value="consent">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</div>
</main>
</body>
</html>
`;
}
