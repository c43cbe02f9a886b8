// The access page: who holds which role on a resource, and what a user can reach; owners grant and revoke here.

import { AUDIT_COLUMNS, auditRows, RESOURCE_TYPES, ROLES } from "./audit-records.js";
import {
  api,
  Component,
  Confirm,
  can,
  ErrorNote,
  fmtTime,
  html,
  query,
  Status,
  Table,
  utcFromField,
} from "./ui.js";

/** @import { FieldEvent } from "../browser" */
/** @import { AuditPage, AuditRecord, CheckResult, List, RoleGrant, UserResources } from "../api-types" */

/** @typedef {{ resourceType: string, resourceId: string }} ResourceRef */

/**
 * @typedef {object} ResourceAccessState
 * @property {RoleGrant[] | null} grants None until they are read.
 * @property {boolean} owner Whether the session's user owns the resource (and may write grants).
 * @property {AuditRecord[] | null} audit
 * @property {unknown} error
 * @property {string} notice
 * @property {RoleGrant | null} revoking The grant whose revocation waits for the user's confirmation.
 * @property {string} grantUser
 * @property {string} grantRole
 * @property {string} grantExpires
 */

/**
 * Who holds which role on one resource, and its audit trail.
 * @extends {Component<ResourceRef, ResourceAccessState>}
 */
class ResourceAccess extends Component {
  /** @type {ResourceAccessState} */
  state = {
    grants: null,
    owner: false,
    audit: null,
    error: null,
    notice: "",
    revoking: null,
    grantUser: "",
    grantRole: "reader",
    grantExpires: "",
  };
  componentDidMount() {
    this.load();
  }
  get ref() {
    return { resourceType: this.props.resourceType, resourceId: this.props.resourceId };
  }
  async load() {
    const { resourceType, resourceId } = this.ref;
    const path = `/${encodeURIComponent(resourceType)}/${encodeURIComponent(resourceId)}`;
    try {
      const [grants, check] = await Promise.all([
        /** @type {Promise<List<RoleGrant>>} */ (api("GET", `/admin/authorization/resources${path}/grants`)),
        can("authorization:read")
          ? /** @type {Promise<CheckResult>} */ (
              api("GET", `/authorization/llm/check${query({ resourceType, resourceId, role: "owner" })}`)
            )
          : Promise.resolve({ allowed: false }),
      ]);
      // The resource's changes; administrators' reads of it (`inspect`) are on the audit trail page.
      /** @type {AuditPage} */
      const audit = await api("GET", `/admin/audit${query({ resourceType, resourceId, limit: 100 })}`);
      this.setState({
        grants: grants.data,
        owner: check.allowed && can("authorization:write"),
        audit: audit.data.filter((r) => r.action !== "inspect"),
        error: null,
      });
    } catch (error) {
      this.setState({ error });
    }
  }
  revoke = async () => {
    const g = this.state.revoking;
    if (!g) return;
    this.setState({ revoking: null });
    try {
      await api("POST", "/authorization/llm/revoke", { ...this.ref, userId: g.userId, role: g.role });
      await this.load();
      this.setState({ notice: `Revoked ${g.role} from ${g.userId}.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  grant = async (/** @type {Event} */ e) => {
    e.preventDefault();
    const { grantUser, grantRole, grantExpires } = this.state;
    try {
      await api("POST", "/authorization/llm/grant", {
        ...this.ref,
        userId: grantUser.trim(),
        role: grantRole,
        ...(grantExpires ? { expiresAt: utcFromField(grantExpires) } : {}),
      });
      await this.load();
      this.setState({ notice: `Granted ${grantRole} to ${grantUser.trim()}.`, grantUser: "" });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {ResourceRef} props
   * @param {ResourceAccessState} state
   */
  render(
    { resourceType, resourceId },
    { grants, owner, audit, error, notice, revoking, grantUser, grantRole, grantExpires },
  ) {
    return html`<section aria-labelledby="resource-title">
      <h2 id="resource-title">${resourceType}:${resourceId}</h2>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      <p class="hint">${owner ? "You own this resource: you may grant and revoke." : "Read-only: only the resource's owners grant and revoke."}</p>
      ${
        grants
          ? html`<${Table}
            caption="Who holds which role"
            columns=${owner ? ["User", "Role", "Expires", "Actions"] : ["User", "Role", "Expires"]}
            empty="No one holds a role (unknown resource?)."
            rows=${grants.map((g) => [
              g.userId === "*" ? "* (everyone in the organization)" : g.userId,
              g.role,
              g.expiresAt ? fmtTime(g.expiresAt) : "never",
              ...(owner
                ? [
                    html`<button type="button" class="danger" aria-label=${`Revoke ${g.role} from ${g.userId}`} onClick=${() => this.setState({ revoking: g })}>Revoke</button>`,
                  ]
                : []),
            ])}
          />`
          : null
      }
      ${
        owner
          ? html`<form class="row card" onSubmit=${this.grant} aria-label="Grant a role">
            <label for="grant-user">User id (or *)<input id="grant-user" required value=${grantUser} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ grantUser: e.currentTarget.value })} /></label>
            <label for="grant-role">Role<select id="grant-role" value=${grantRole} onChange=${(/** @type {FieldEvent} */ e) => this.setState({ grantRole: e.currentTarget.value })}>${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}</select></label>
            <label for="grant-expires">Expires (UTC, optional)<input id="grant-expires" type="datetime-local" value=${grantExpires} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ grantExpires: e.currentTarget.value })} /></label>
            <button type="submit">Grant</button>
          </form>`
          : null
      }
      ${audit ? html`<h3>Audit trail of this resource</h3><${Table} caption="Audit trail of this resource, newest first" columns=${AUDIT_COLUMNS} rows=${auditRows(audit)} />` : null}
      ${
        revoking
          ? html`<${Confirm}
            title="Revoke this role?"
            text=${`${revoking.userId} loses ${revoking.role} on ${resourceType}:${resourceId}.`}
            confirmLabel="Yes, revoke"
            onConfirm=${this.revoke}
            onCancel=${() => this.setState({ revoking: null })}
          />`
          : null
      }
    </section>`;
  }
}

/**
 * @typedef {object} UserAccessState
 * @property {UserResources[] | null} results One per resource type; none until they are read.
 * @property {unknown} error
 */

/**
 * The resources a user can read, by type.
 * @extends {Component<{ userId: string }, UserAccessState>}
 */
class UserAccess extends Component {
  /** @type {UserAccessState} */
  state = { results: null, error: null };
  async componentDidMount() {
    try {
      const results = await Promise.all(
        RESOURCE_TYPES.map(
          (t) =>
            /** @type {Promise<UserResources>} */ (
              api(
                "GET",
                `/admin/authorization/users/${encodeURIComponent(this.props.userId)}/resources${query({ resourceType: t })}`,
              )
            ),
        ),
      );
      this.setState({ results });
    } catch (error) {
      this.setState({ error });
    }
  }
  /**
   * @param {{ userId: string }} props
   * @param {UserAccessState} state
   */
  render({ userId }, { results, error }) {
    return html`<section aria-labelledby="user-title">
      <h2 id="user-title">What ${userId} can read</h2>
      <${ErrorNote} error=${error} />
      ${
        results
          ? html`<${Table}
            caption=${`Resources ${userId} can read, by type`}
            columns=${["Type", "Resources"]}
            rows=${results.map((r) => [
              r.resourceType,
              r.data.length
                ? html`<ul class="tags">${r.data.map((d) => html`<li><a href=${`/admin/access${query({ resourceType: r.resourceType, resourceId: d.resourceId })}`}>${d.resourceId}</a></li>`)}${r.has_more ? html`<li>…</li>` : null}</ul>`
                : "none",
            ])}
          />`
          : null
      }
    </section>`;
  }
}

export function AccessPage() {
  const q = new URLSearchParams(window.location.search);
  const resourceType = q.get("resourceType") ?? "conversation";
  const resourceId = q.get("resourceId") ?? "";
  const userId = q.get("userId") ?? "";
  return html`<h1>Access</h1>
    <div class="two">
      <form class="card" method="get" action="/admin/access" aria-label="Who has access to a resource">
        <h2>A resource</h2>
        <label for="access-type">Resource type<select id="access-type" name="resourceType">${RESOURCE_TYPES.map((t) => html`<option value=${t} selected=${t === resourceType}>${t}</option>`)}</select></label>
        <label for="access-id">Resource id<input id="access-id" name="resourceId" required value=${resourceId} /></label>
        <button type="submit">Show access</button>
      </form>
      <form class="card" method="get" action="/admin/access" aria-label="What a user can read">
        <h2>A user</h2>
        <label for="access-user">User id<input id="access-user" name="userId" required value=${userId} /></label>
        <button type="submit">Show what they can read</button>
      </form>
    </div>
    ${resourceId ? html`<${ResourceAccess} resourceType=${resourceType} resourceId=${resourceId} />` : null}
    ${userId ? html`<${UserAccess} userId=${userId} />` : null}`;
}
