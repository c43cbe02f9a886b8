// The keys page: list, create (the secret shown once), change, revoke the organization's API keys.

import { describeLimits, LimitFields, unitLimits, unitValues } from "./limits.js";
import {
  api,
  Component,
  Confirm,
  copy,
  ErrorNote,
  fmtTime,
  html,
  Status,
  session,
  Table,
  utcFromField,
} from "./ui.js";

/** @import { FieldEvent } from "../browser" */
/** @import { ApiKey, CreatedApiKey, EndUserLimits, List, OnBehalfOf, UnitLimitsChange } from "../api-types" */
/** @import { LimitValues } from "./limits.js" */

// The API's own lists (`@gw/core/permissions`), as the server wrote them into the page.
const PERMISSIONS = session.allPermissions;
const DEFAULT_PERMISSIONS = session.defaultPermissions;

const describePolicy = (/** @type {OnBehalfOf} */ p) =>
  p === "any"
    ? "any end user but other keys' owners"
    : p === "none"
      ? "its owner only"
      : [
          p?.prefixes ? `prefixes: ${p.prefixes.join(", ")}` : null,
          p?.users ? `users: ${p.users.join(", ")}` : null,
        ]
          .filter(Boolean)
          .join("; ");

/** A comma-separated field → its non-empty entries, or `undefined` when there are none. */
const listOrNothing = (/** @type {string} */ text) => {
  const list = text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return list.length ? list : undefined;
};

/**
 * What the key form sends: all of a new key, or a change (`null` removes a name, a models list, an expiry).
 * @typedef {object} KeyBody
 * @property {string | null} [name]
 * @property {string} [owner]
 * @property {string[]} permissions
 * @property {UnitLimitsChange & { endUser: UnitLimitsChange }} limits
 * @property {string[] | null} [models]
 * @property {string | { prefixes?: string[], users?: string[] }} onBehalfOf
 * @property {string | null} [expiresAt]
 */

/**
 * @typedef {object} KeyFormProps
 * @property {string} prefix Before every field's id, so that two forms on the page have their own.
 * @property {ApiKey} [existing] The key to change; none: a form for a new key.
 * @property {(body: KeyBody) => Promise<void>} onSubmit
 * @property {() => void} [onCancel]
 */

/**
 * @typedef {object} KeyFormState
 * @property {LimitValues & { name: string, owner: string, models: string, obo: string, prefixes: string, users: string, expiresAt: string }} values
 * @property {Set<string>} permissions
 * @property {unknown} error
 * @property {boolean} busy
 */

/**
 * The fields of a key, for creating (all) or changing (name, limits, models, policy, permissions, expiry).
 * @extends {Component<KeyFormProps, KeyFormState>}
 */
class KeyForm extends Component {
  /** @param {KeyFormProps} props */
  constructor(props) {
    super(props);
    const k = props.existing;
    const obo = k?.onBehalfOf ?? "any";
    this.state = {
      values: {
        name: k?.name ?? "",
        owner: k?.owner ?? "",
        models: k?.models ? k.models.join(", ") : "",
        obo: typeof obo === "string" ? obo : "listed",
        prefixes: typeof obo === "object" ? (obo.prefixes ?? []).join(", ") : "",
        users: typeof obo === "object" ? (obo.users ?? []).join(", ") : "",
        expiresAt: k?.expiresAt ? k.expiresAt.slice(0, 16) : "",
        ...unitValues(k?.limits, `${props.prefix}`),
        ...unitValues(k?.limits?.endUser, `${props.prefix}eu-`),
      },
      permissions: new Set(k?.permissions ?? DEFAULT_PERMISSIONS),
      error: null,
      busy: false,
    };
  }
  set = (/** @type {string} */ id, /** @type {string} */ value) =>
    this.setState({ values: { ...this.state.values, [id]: value } });
  submit = async (/** @type {Event} */ e) => {
    e.preventDefault();
    const { values, permissions } = this.state;
    const p = this.props.prefix;
    const editing = Boolean(this.props.existing);
    const limits = {
      ...unitLimits(values, p, editing),
      endUser: unitLimits(values, `${p}eu-`, editing),
    };
    const models = values.models
      .split(/[\s,]+/)
      .map((m) => m.trim())
      .filter(Boolean);
    /** @type {KeyBody} */
    const body = {
      name: values.name.trim() || (editing ? null : undefined),
      permissions: [...permissions],
      limits,
      models: models.length ? models : editing ? null : undefined,
      onBehalfOf:
        values.obo === "listed"
          ? { prefixes: listOrNothing(values.prefixes), users: listOrNothing(values.users) }
          : values.obo,
      expiresAt: values.expiresAt ? utcFromField(values.expiresAt) : editing ? null : undefined,
    };
    if (!editing) body.owner = values.owner.trim();
    this.setState({ busy: true, error: null });
    try {
      await this.props.onSubmit(body);
    } catch (err) {
      this.setState({ error: err });
    } finally {
      this.setState({ busy: false });
    }
  };
  /**
   * @param {KeyFormProps} props
   * @param {KeyFormState} state
   */
  render({ prefix: p, existing, onCancel }, { values, permissions, error, busy }) {
    const editing = Boolean(existing);
    const togglePermission = (/** @type {string} */ perm) => {
      const next = new Set(permissions);
      if (next.has(perm)) next.delete(perm);
      else next.add(perm);
      this.setState({ permissions: next });
    };
    return html`<form class="card key-form" onSubmit=${this.submit} aria-label=${existing ? `Change key ${existing.id}` : "Create a key"}>
      <h3>${existing ? `Change ${existing.name ?? existing.id}` : "Create a key"}</h3>
      <div class="grid">
        <label for=${`${p}name`}>Name<input id=${`${p}name`} value=${values.name} maxlength="256" onInput=${(/** @type {FieldEvent} */ e) => this.set("name", e.currentTarget.value)} /></label>
        ${
          editing
            ? null
            : html`<label for=${`${p}owner`}>Owner (user id)<input id=${`${p}owner`} required value=${values.owner} onInput=${(/** @type {FieldEvent} */ e) => this.set("owner", e.currentTarget.value)} /></label>`
        }
        <label for=${`${p}models`}>Models (allowlist, comma-separated; empty: any)<input id=${`${p}models`} value=${values.models} onInput=${(/** @type {FieldEvent} */ e) => this.set("models", e.currentTarget.value)} /></label>
        <label for=${`${p}expires`}>Expires at (UTC, empty: never)<input id=${`${p}expires`} type="datetime-local" value=${values.expiresAt} onInput=${(/** @type {FieldEvent} */ e) => this.set("expiresAt", e.currentTarget.value)} /></label>
        <label for=${`${p}obo`}>On-behalf-of policy
          <select id=${`${p}obo`} value=${values.obo} onChange=${(/** @type {FieldEvent} */ e) => this.set("obo", e.currentTarget.value)}>
            <option value="any">any end user but other keys' owners</option>
            <option value="none">its owner only</option>
            <option value="listed">end users by prefix or by id</option>
          </select></label>
        ${
          values.obo === "listed"
            ? html`<label for=${`${p}prefixes`}>Prefixes (comma-separated; never other keys' owners)<input id=${`${p}prefixes`} value=${values.prefixes} onInput=${(/** @type {FieldEvent} */ e) => this.set("prefixes", e.currentTarget.value)} /></label>
              <label for=${`${p}users`}>Users (comma-separated; other keys' owners allowed, each use audited)<input id=${`${p}users`} value=${values.users} onInput=${(/** @type {FieldEvent} */ e) => this.set("users", e.currentTarget.value)} /></label>`
            : null
        }
      </div>
      <fieldset class="permissions">
        <legend>Permissions</legend>
        ${PERMISSIONS.map(
          (perm) =>
            html`<label class="check" for=${`${p}perm-${perm}`}><input type="checkbox" id=${`${p}perm-${perm}`} checked=${permissions.has(perm)} onChange=${() => togglePermission(perm)} /> ${perm}</label>`,
        )}
      </fieldset>
      <${LimitFields} legend="Limits of the key" prefix=${p} values=${values} onInput=${this.set} />
      <${LimitFields} legend="Limits of each end user of the key" prefix=${`${p}eu-`} values=${values} onInput=${this.set} />
      <${ErrorNote} error=${error} />
      <div class="row">
        <button type="submit" disabled=${busy}>${editing ? "Save changes" : "Create key"}</button>
        ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      </div>
    </form>`;
  }
}

/**
 * A new key's secret, shown this once.
 * @param {{ created: CreatedApiKey, onDone: () => void }} props
 */
function SecretOnce({ created, onDone }) {
  return html`<section class="card secret" aria-labelledby="secret-title">
    <h3 id="secret-title">Key ${created.name ?? created.id} created</h3>
    <p>Its secret is shown this once: copy it now.</p>
    <label for="new-secret">Secret</label>
    <input id="new-secret" readonly value=${created.key} onFocus=${(/** @type {FocusEvent & { currentTarget: HTMLInputElement }} */ e) => e.currentTarget.select()} />
    <div class="row">
      <button type="button" onClick=${async (
        /** @type {MouseEvent & { currentTarget: HTMLButtonElement }} */ e,
      ) => {
        const button = e.currentTarget;
        await copy(created.key);
        button.textContent = "Copied";
      }}>Copy secret</button>
      <button type="button" onClick=${onDone}>Done</button>
    </div>
  </section>`;
}

/**
 * @typedef {object} EndUserDefaultsState
 * @property {LimitValues | null} values None until they are read.
 * @property {unknown} error
 * @property {boolean} saved
 */

/**
 * The organization's limits of each end user, where a key sets none.
 * @extends {Component<{}, EndUserDefaultsState>}
 */
class EndUserDefaults extends Component {
  /** @type {EndUserDefaultsState} */
  state = { values: null, error: null, saved: false };
  async componentDidMount() {
    try {
      /** @type {EndUserLimits} */
      const body = await api("GET", "/admin/end-user-limits");
      this.setState({ values: unitValues(body.endUser, "org-") });
    } catch (error) {
      this.setState({ error });
    }
  }
  submit = async (/** @type {Event} */ e) => {
    e.preventDefault();
    // The form is shown only once the values are read.
    const { values } = this.state;
    if (!values) return;
    try {
      await api("PATCH", "/admin/end-user-limits", unitLimits(values, "org-", true));
      this.setState({ saved: true, error: null });
    } catch (error) {
      this.setState({ error, saved: false });
    }
  };
  /**
   * @param {{}} _
   * @param {EndUserDefaultsState} state
   */
  render(_, { values, error, saved }) {
    return html`<section aria-labelledby="defaults-title">
      <h2 id="defaults-title">End-user defaults of ${session.org}</h2>
      <p class="hint">Limits of each end user of every key, where the key's own end-user limits set none.</p>
      <${ErrorNote} error=${error} />
      ${
        values
          ? html`<form class="card" onSubmit=${this.submit} aria-label="End-user defaults">
            <${LimitFields} legend="Each end user" prefix="org-" values=${values} onInput=${(/** @type {string} */ id, /** @type {string} */ v) => this.setState({ values: { ...values, [id]: v }, saved: false })} />
            <button type="submit">Save defaults</button>
            ${saved ? html`<${Status} text="Defaults saved." />` : null}
          </form>`
          : null
      }
    </section>`;
  }
}

/**
 * @typedef {object} KeysPageState
 * @property {ApiKey[] | null} keys None until they are read.
 * @property {unknown} error
 * @property {boolean} creating
 * @property {CreatedApiKey | null} created The key just created, its secret shown once.
 * @property {ApiKey | null} editing
 * @property {ApiKey | null} revoking The key whose revocation waits for the user's confirmation.
 * @property {string} notice
 */

/** @extends {Component<{}, KeysPageState>} */
export class KeysPage extends Component {
  /** @type {KeysPageState} */
  state = {
    keys: null,
    error: null,
    creating: false,
    created: null,
    editing: null,
    revoking: null,
    notice: "",
  };
  componentDidMount() {
    this.load();
  }
  async load() {
    try {
      /** @type {List<ApiKey>} */
      const body = await api("GET", "/admin/api-keys");
      this.setState({ keys: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  create = async (/** @type {KeyBody} */ body) => {
    /** @type {CreatedApiKey} */
    const created = await api("POST", "/admin/api-keys", body);
    this.setState({ created, creating: false, notice: "" });
    await this.load();
  };
  update = async (/** @type {KeyBody} */ body) => {
    const key = this.state.editing;
    if (!key) return;
    /** @type {ApiKey} */
    const updated = await api("PATCH", `/admin/api-keys/${encodeURIComponent(key.id)}`, body);
    await this.load();
    this.setState({ editing: null, notice: `Key ${updated.name ?? updated.id} changed.` });
  };
  revoke = async () => {
    const key = this.state.revoking;
    if (!key) return;
    this.setState({ revoking: null });
    try {
      await api("DELETE", `/admin/api-keys/${encodeURIComponent(key.id)}`);
      if (key.id === session.keyId) {
        window.location.assign("/admin/sign-in");
        return;
      }
      await this.load();
      this.setState({ notice: `Key ${key.name ?? key.id} revoked.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{}} _
   * @param {KeysPageState} state
   */
  render(_, { keys, error, creating, created, editing, revoking, notice }) {
    const rows = (keys ?? []).map((k) => [
      html`<strong>${k.name ?? "—"}</strong>`,
      // An expired key can still be changed (its expiry moved) or revoked.
      k.status !== "revoked"
        ? html`<div class="row">
            <button type="button" onClick=${() => this.setState({ editing: k, creating: false })} aria-label=${`Change key ${k.name ?? k.id}`}>Change</button>
            <button type="button" class="danger" onClick=${() => this.setState({ revoking: k })} aria-label=${`Revoke key ${k.name ?? k.id}`}>Revoke</button>
          </div>`
        : html`<span class="hint">revoked ${fmtTime(k.revokedAt)}</span>`,
      html`<code>${k.id}</code><br /><span class="hint">${k.start}…</span>`,
      k.owner,
      html`<span class=${`badge ${k.status}`}>${k.status}</span>`,
      html`<details><summary>${k.permissions.length} permission${k.permissions.length === 1 ? "" : "s"}</summary><ul class="tags">${k.permissions.map((p) => html`<li>${p}</li>`)}</ul></details>`,
      describeLimits(k.limits),
      describeLimits(k.limits?.endUser),
      k.models ? k.models.join(", ") : "any",
      describePolicy(k.onBehalfOf),
      html`<dl class="dates">
        <dt>Created</dt><dd>${fmtTime(k.createdAt)}</dd>
        <dt>Last used</dt><dd>${k.lastUsedAt ? fmtTime(k.lastUsedAt) : "never"}</dd>
        <dt>Expires</dt><dd>${k.expiresAt ? fmtTime(k.expiresAt) : "never"}</dd>
      </dl>`,
    ]);
    return html`<h1>API keys</h1>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      ${created ? html`<${SecretOnce} created=${created} onDone=${() => this.setState({ created: null })} />` : null}
      ${
        creating
          ? html`<${KeyForm} prefix="new-" onSubmit=${this.create} onCancel=${() => this.setState({ creating: false })} />`
          : html`<p><button type="button" onClick=${() => this.setState({ creating: true, editing: null, created: null })}>New key</button></p>`
      }
      ${editing ? html`<${KeyForm} key=${editing.id} prefix="edit-" existing=${editing} onSubmit=${this.update} onCancel=${() => this.setState({ editing: null })} />` : null}
      ${
        keys
          ? html`<${Table}
            caption=${`Keys of ${session.org}`}
            columns=${["Name", "Actions", "Id", "Owner", "Status", "Permissions", "Limits", "End-user limits", "Models", "On behalf of", "Created, last used, expires"]}
            rows=${rows}
          />`
          : html`<p>Loading keys…</p>`
      }
      ${
        revoking
          ? html`<${Confirm}
            title="Revoke this key?"
            text=${`Key ${revoking.name ?? revoking.id} stops working at once, and revocation is final.`}
            confirmLabel="Yes, revoke"
            onConfirm=${this.revoke}
            onCancel=${() => this.setState({ revoking: null })}
          />`
          : null
      }
      <${EndUserDefaults} />`;
  }
}
