// Boots the page the path names, with the navigation the session's permissions allow.
import { AccessPage } from "./access-page.js";
import { AuditPage } from "./audit-page.js";
import { EvalsPage } from "./evals-page.js";
import { GuardrailsPage } from "./guardrails-page.js";
import { KeysPage } from "./keys-page.js";
import { ToolsPage } from "./tools-page.js";
import { can, html, render, session, shellElement } from "./ui.js";
import { UsagePage } from "./usage-page.js";

const PAGES = [
  { path: "keys", title: "Keys", view: KeysPage, allowed: () => can("admin:api-keys") },
  { path: "usage", title: "Usage and spend", view: UsagePage, allowed: () => can("usage:read") },
  { path: "access", title: "Access", view: AccessPage, allowed: () => can("admin:console") },
  { path: "audit", title: "Audit trail", view: AuditPage, allowed: () => can("admin:console") },
  { path: "evals", title: "Eval schedules", view: EvalsPage, allowed: () => can("evals:read") },
  { path: "guardrails", title: "Guardrails", view: GuardrailsPage, allowed: () => can("guardrails:read") },
  // Only when the gateway serves the MCP API (otherwise the page would ask for what is not there) and the key may read it.
  { path: "tools", title: "Tool servers", view: ToolsPage, allowed: () => session.mcp && can("mcp:read") },
];

const current = window.location.pathname.replace(/^\/admin\/?/, "").replace(/\/$/, "");
const visible = PAGES.filter((p) => p.allowed());
const page = visible.find((p) => p.path === current) ?? (current === "" ? visible[0] : undefined);

render(
  html`<ul>
    ${visible.map(
      (p) =>
        html`<li><a href=${`/admin/${p.path}`} aria-current=${p === page ? "page" : undefined}>${p.title}</a></li>`,
    )}
  </ul>`,
  shellElement("nav"),
);

const main = shellElement("main");
main.textContent = "";
if (page) {
  document.title = `${page.title} · Gateway admin console`;
  render(html`<${page.view} />`, main);
} else {
  render(html`<h1>Not available</h1><p>This page is not available to this key.</p>`, main);
}
