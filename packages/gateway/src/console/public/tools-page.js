// The tool servers page: registered MCP servers, their tools, and the OAuth clients acting for users.
import { api, Component, Confirm, can, ErrorNote, fmtUnix, html, query, Status, Table } from "./ui.js";

/** @import { CheckResult, List, McpCredential, McpOAuthGrant, McpServer, McpTool } from "../api-types" */

/**
 * A server opened: its tools (`null`: not its owner, so not shown) and its credentials.
 * @typedef {{ name: string, tools: McpTool[] | null, credentials: McpCredential[] }} ServerDetail
 */

/**
 * @typedef {object} ToolsPageState
 * @property {McpServer[] | null} servers None until they are read.
 * @property {Record<string, ServerDetail>} detail The servers opened, by id.
 * @property {unknown} error
 */

/** @extends {Component<{}, ToolsPageState>} */
export class ToolsPage extends Component {
  /** @type {ToolsPageState} */
  state = { servers: null, detail: {}, error: null };
  async componentDidMount() {
    try {
      /** @type {List<McpServer>} */
      const body = await api("GET", "/mcp/servers?limit=100");
      this.setState({ servers: body.data ?? [] });
    } catch (error) {
      this.setState({ error });
    }
  }
  open = async (/** @type {McpServer} */ s) => {
    const id = encodeURIComponent(s.id);
    try {
      // A server's tools and their roles are for its owners: asked only where a check says so.
      const owner = can("authorization:read")
        ? /** @type {CheckResult} */ (
            await api(
              "GET",
              `/authorization/llm/check${query({ resourceType: "mcp_server", resourceId: s.id, role: "owner" })}`,
            )
          ).allowed
        : false;
      // Credentials first: listing the tools calls the server with one, and the table shows the
      // credentials as they were before this view's own call (read at once, it showed that call or not by chance).
      /** @type {List<McpCredential>} */
      const credentials = await api("GET", `/mcp/servers/${id}/credentials`);
      /** @type {List<McpTool> | null} */
      const tools = owner ? await api("GET", `/mcp/servers/${id}/tools`) : null;
      this.setState({
        detail: {
          ...this.state.detail,
          [s.id]: { name: s.name, tools: tools?.data ?? null, credentials: credentials.data ?? [] },
        },
      });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{}} _
   * @param {ToolsPageState} state
   */
  render(_, { servers, detail, error }) {
    return html`<h1>Tool servers</h1>
      <${ErrorNote} error=${error} />
      ${
        servers
          ? html`<${Table}
            caption="MCP servers of the organization"
            columns=${["Name", "Id", "URL", "Description", "Created", ""]}
            empty="No tool servers."
            rows=${servers.map((s) => [
              s.name ?? "—",
              html`<a href=${`/admin/access${query({ resourceType: "mcp_server", resourceId: s.id })}`} aria-label=${`Who holds which role on ${s.name ?? s.id}`}><code>${s.id}</code></a>`,
              s.url ?? "—",
              s.description ?? "—",
              fmtUnix(s.created_at),
              html`<button type="button" onClick=${() => this.open(s)} aria-label=${`Tools and credentials of ${s.name ?? s.id}`}>Tools and credentials</button>`,
            ])}
          />`
          : null
      }
      ${Object.entries(detail).map(
        ([id, d]) => html`<section aria-label=${`Server ${d.name ?? id}`}>
          <h2>${d.name ?? id}</h2>
          ${
            d.tools
              ? html`<${Table} caption=${`Tools of ${d.name ?? id} and the role each needs`} columns=${["Tool", "Description", "Read-only", "Required role", "Disabled", "Offered now"]}
                empty="The server offers no tools."
                rows=${d.tools.map((t) => [t.name, t.description ?? "—", t.read_only_hint ? "yes" : "no", t.disabled ? "— (disabled)" : (t.required_role ?? "—"), t.disabled ? "yes" : "no", t.offered ? "yes" : "no"])} />`
              : html`<p class="hint">Its tools and their roles are shown to its owners.</p>`
          }
          <${Table} caption=${`Credentials of ${d.name ?? id}, by scope and date (never a secret)`} columns=${["Scope", "Type", "Header", "Created", "Last used"]}
            empty="No credentials."
            rows=${d.credentials.map((c) => [c.scope, c.type, c.name ?? "—", fmtUnix(c.created_at), c.last_used_at ? fmtUnix(c.last_used_at) : "never"])} />
        </section>`,
      )}
      ${can("admin:api-keys") ? html`<${AuthorizedClients} />` : null}`;
  }
}

/**
 * @typedef {object} AuthorizedClientsState
 * @property {McpOAuthGrant[] | null} grants None until they are read.
 * @property {unknown} error
 * @property {McpOAuthGrant | null} revoking The grant whose revocation waits for the user's confirmation.
 * @property {string | null} notice
 */

/**
 * MCP clients the organization's users let act for them with OAuth (docs/api/mcp-oauth.md): revoking one ends its next call.
 * @extends {Component<{}, AuthorizedClientsState>}
 */
class AuthorizedClients extends Component {
  /** @type {AuthorizedClientsState} */
  state = {
    grants: null,
    error: null,
    revoking: null,
    notice: null,
  };
  componentDidMount() {
    this.load();
  }
  load = async () => {
    try {
      /** @type {List<McpOAuthGrant>} */
      const body = await api("GET", "/admin/mcp-oauth/grants");
      this.setState({ grants: body.data ?? [] });
    } catch (error) {
      this.setState({ error });
    }
  };
  revoke = async () => {
    const g = this.state.revoking;
    if (!g) return;
    this.setState({ revoking: null, error: null });
    try {
      await api("DELETE", `/admin/mcp-oauth/grants/${encodeURIComponent(g.id)}`);
      await this.load();
      this.setState({ notice: `${g.clientName ?? g.clientId} can no longer act for ${g.userId}.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{}} _
   * @param {AuthorizedClientsState} state
   */
  render(_, { grants, error, revoking, notice }) {
    return html`<section aria-label="Authorized clients">
      <h2>Authorized clients</h2>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      ${
        grants
          ? html`<${Table}
            caption="MCP clients the organization's users signed in with (OAuth), newest first"
            columns=${["Client", "User", "Tool server", "Permission", "Granted", "Last token", ""]}
            empty="No authorized clients."
            rows=${grants.map((g) => [
              html`${g.clientName ?? "—"} <code>${g.clientId}</code>`,
              g.userId,
              html`${g.serverName ?? "—"} <code>${g.serverId}</code>`,
              g.scope,
              fmtUnix(g.grantedAt),
              g.lastUsedAt ? fmtUnix(g.lastUsedAt) : "never",
              html`<button type="button" class="danger" onClick=${() => this.setState({ revoking: g, notice: null })} aria-label=${`Revoke ${g.clientName ?? g.clientId} for ${g.userId}`}>Revoke</button>`,
            ])}
          />`
          : html`<p>Loading authorized clients…</p>`
      }
      ${
        revoking
          ? html`<${Confirm}
            title="Revoke this client?"
            text=${`${revoking.clientName ?? revoking.clientId} stops acting for ${revoking.userId} on ${revoking.serverName ?? revoking.serverId} at its next call; the user must sign in and consent again.`}
            confirmLabel="Yes, revoke"
            onConfirm=${this.revoke}
            onCancel=${() => this.setState({ revoking: null })}
          />`
          : null
      }
    </section>`;
  }
}
