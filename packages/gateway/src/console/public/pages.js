// The console's pages. Each reads and changes state only through the gateway's JSON API (`api`).
import {
  ApiError,
  api,
  ChartView,
  Component,
  Confirm,
  can,
  copy,
  ErrorNote,
  fmtNum,
  fmtTime,
  fmtUnix,
  fmtUsd,
  html,
  query,
  Status,
  session,
  Table,
} from "./ui.js";

// The API's own lists (`@gw/core/permissions`), as the server wrote them into the page.
const PERMISSIONS = session.allPermissions;
const DEFAULT_PERMISSIONS = session.defaultPermissions;
const REQUEST_WINDOWS = ["second", "minute", "hour", "day"];
const TOKEN_WINDOWS = ["minute", "hour", "day", "month"];
const SPEND_WINDOWS = ["day", "month"];
const RESOURCE_TYPES = [
  "conversation",
  "response",
  "file",
  "vector_store",
  "skill",
  "completion",
  // A registered MCP server (docs/api/mcp.md): its roles are granted and revoked as any resource's.
  ...(session.mcp ? ["mcp_server"] : []),
];
const ROLES = ["owner", "writer", "reader"];

/** `{second: 5, tokens: {minute: 100}}` → `requests/second 5, tokens/minute 100`. */
export function describeLimits(limits) {
  if (!limits) return "none";
  const parts = [];
  for (const w of REQUEST_WINDOWS) if (limits[w] !== undefined) parts.push(`${limits[w]} requests/${w}`);
  for (const w of TOKEN_WINDOWS)
    if (limits.tokens?.[w] !== undefined) parts.push(`${limits.tokens[w]} tokens/${w}`);
  for (const w of SPEND_WINDOWS)
    if (limits.spend?.[w] !== undefined) parts.push(`$${limits.spend[w]} spend/${w}`);
  return parts.length ? parts.join(", ") : "none";
}

const describePolicy = (p) =>
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
const listOrNothing = (text) => {
  const list = text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return list.length ? list : undefined;
};

// ---------------------------------------------------------------- limits fields

const unitFields = (prefix) => [
  ...REQUEST_WINDOWS.map((w) => ({ id: `${prefix}req-${w}`, label: `Requests per ${w}`, unit: null, w })),
  ...TOKEN_WINDOWS.map((w) => ({ id: `${prefix}tok-${w}`, label: `Tokens per ${w}`, unit: "tokens", w })),
  ...SPEND_WINDOWS.map((w) => ({ id: `${prefix}usd-${w}`, label: `Spend per ${w} (USD)`, unit: "spend", w })),
];

function unitValues(limits, prefix) {
  const values = {};
  for (const f of unitFields(prefix)) {
    const v = f.unit ? limits?.[f.unit]?.[f.w] : limits?.[f.w];
    values[f.id] = v === undefined ? "" : String(v);
  }
  return values;
}

/** The form's values as a `limits` object; `removeEmpty` sends `null` for empty windows (a PATCH). */
function unitLimits(values, prefix, removeEmpty) {
  const out = {};
  for (const f of unitFields(prefix)) {
    const raw = (values[f.id] ?? "").trim();
    if (raw === "" && !removeEmpty) continue;
    const v = raw === "" ? null : Number(raw);
    if (f.unit) {
      out[f.unit] ??= {};
      out[f.unit][f.w] = v;
    } else out[f.w] = v;
  }
  return out;
}

function LimitFields({ legend, prefix, values, onInput }) {
  return html`<fieldset class="limits">
    <legend>${legend}</legend>
    ${unitFields(prefix).map(
      (f) => html`<label for=${f.id}>${f.label}
        <input id=${f.id} name=${f.id} type="number" min=${f.unit === "spend" ? "0" : "1"} step=${f.unit === "spend" ? "0.01" : "1"}
          inputmode="decimal" value=${values[f.id]} onInput=${(e) => onInput(f.id, e.currentTarget.value)} /></label>`,
    )}
  </fieldset>`;
}

// ---------------------------------------------------------------- keys

/** The fields of a key, for creating (all) or changing (name, limits, models, policy, permissions, expiry). */
class KeyForm extends Component {
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
  set = (id, value) => this.setState({ values: { ...this.state.values, [id]: value } });
  submit = async (e) => {
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
    const body = {
      name: values.name.trim() || (editing ? null : undefined),
      permissions: [...permissions],
      limits,
      models: models.length ? models : editing ? null : undefined,
      onBehalfOf:
        values.obo === "listed"
          ? { prefixes: listOrNothing(values.prefixes), users: listOrNothing(values.users) }
          : values.obo,
      expiresAt: values.expiresAt ? new Date(values.expiresAt).toISOString() : editing ? null : undefined,
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
  render({ prefix: p, existing, onCancel }, { values, permissions, error, busy }) {
    const editing = Boolean(existing);
    const togglePermission = (perm) => {
      const next = new Set(permissions);
      if (next.has(perm)) next.delete(perm);
      else next.add(perm);
      this.setState({ permissions: next });
    };
    return html`<form class="card key-form" onSubmit=${this.submit} aria-label=${editing ? `Change key ${existing.id}` : "Create a key"}>
      <h3>${editing ? `Change ${existing.name ?? existing.id}` : "Create a key"}</h3>
      <div class="grid">
        <label for=${`${p}name`}>Name<input id=${`${p}name`} value=${values.name} maxlength="256" onInput=${(e) => this.set("name", e.currentTarget.value)} /></label>
        ${
          editing
            ? null
            : html`<label for=${`${p}owner`}>Owner (user id)<input id=${`${p}owner`} required value=${values.owner} onInput=${(e) => this.set("owner", e.currentTarget.value)} /></label>`
        }
        <label for=${`${p}models`}>Models (allowlist, comma-separated; empty: any)<input id=${`${p}models`} value=${values.models} onInput=${(e) => this.set("models", e.currentTarget.value)} /></label>
        <label for=${`${p}expires`}>Expires at (UTC, empty: never)<input id=${`${p}expires`} type="datetime-local" value=${values.expiresAt} onInput=${(e) => this.set("expiresAt", e.currentTarget.value)} /></label>
        <label for=${`${p}obo`}>On-behalf-of policy
          <select id=${`${p}obo`} value=${values.obo} onChange=${(e) => this.set("obo", e.currentTarget.value)}>
            <option value="any">any end user but other keys' owners</option>
            <option value="none">its owner only</option>
            <option value="listed">end users by prefix or by id</option>
          </select></label>
        ${
          values.obo === "listed"
            ? html`<label for=${`${p}prefixes`}>Prefixes (comma-separated; never other keys' owners)<input id=${`${p}prefixes`} value=${values.prefixes} onInput=${(e) => this.set("prefixes", e.currentTarget.value)} /></label>
              <label for=${`${p}users`}>Users (comma-separated; other keys' owners allowed, each use audited)<input id=${`${p}users`} value=${values.users} onInput=${(e) => this.set("users", e.currentTarget.value)} /></label>`
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

function SecretOnce({ created, onDone }) {
  return html`<section class="card secret" aria-labelledby="secret-title">
    <h3 id="secret-title">Key ${created.name ?? created.id} created</h3>
    <p>Its secret is shown this once: copy it now.</p>
    <label for="new-secret">Secret</label>
    <input id="new-secret" readonly value=${created.key} onFocus=${(e) => e.currentTarget.select()} />
    <div class="row">
      <button type="button" onClick=${async (e) => {
        const button = e.currentTarget;
        await copy(created.key);
        button.textContent = "Copied";
      }}>Copy secret</button>
      <button type="button" onClick=${onDone}>Done</button>
    </div>
  </section>`;
}

class EndUserDefaults extends Component {
  state = { values: null, error: null, saved: false };
  async componentDidMount() {
    try {
      const body = await api("GET", "/admin/end-user-limits");
      this.setState({ values: unitValues(body.endUser, "org-") });
    } catch (error) {
      this.setState({ error });
    }
  }
  submit = async (e) => {
    e.preventDefault();
    try {
      await api("PATCH", "/admin/end-user-limits", unitLimits(this.state.values, "org-", true));
      this.setState({ saved: true, error: null });
    } catch (error) {
      this.setState({ error, saved: false });
    }
  };
  render(_, { values, error, saved }) {
    return html`<section aria-labelledby="defaults-title">
      <h2 id="defaults-title">End-user defaults of ${session.org}</h2>
      <p class="hint">Limits of each end user of every key, where the key's own end-user limits set none.</p>
      <${ErrorNote} error=${error} />
      ${
        values
          ? html`<form class="card" onSubmit=${this.submit} aria-label="End-user defaults">
            <${LimitFields} legend="Each end user" prefix="org-" values=${values} onInput=${(id, v) => this.setState({ values: { ...values, [id]: v }, saved: false })} />
            <button type="submit">Save defaults</button>
            ${saved ? html`<${Status} text="Defaults saved." />` : null}
          </form>`
          : null
      }
    </section>`;
  }
}

export class KeysPage extends Component {
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
      const body = await api("GET", "/admin/api-keys");
      this.setState({ keys: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  create = async (body) => {
    const created = await api("POST", "/admin/api-keys", body);
    this.setState({ created, creating: false, notice: "" });
    await this.load();
  };
  update = async (body) => {
    const updated = await api("PATCH", `/admin/api-keys/${encodeURIComponent(this.state.editing.id)}`, body);
    await this.load();
    this.setState({ editing: null, notice: `Key ${updated.name ?? updated.id} changed.` });
  };
  revoke = async () => {
    const key = this.state.revoking;
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
  render(_, { keys, error, creating, created, editing, revoking, notice }) {
    const rows = (keys ?? []).map((k) => [
      html`<strong>${k.name ?? "—"}</strong>`,
      k.status === "active"
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

// ---------------------------------------------------------------- usage

const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (n) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);

class KeyWindows extends Component {
  state = { keys: [], keyId: "", windows: null, error: null };
  async componentDidMount() {
    try {
      const body = await api("GET", "/admin/api-keys");
      this.setState({ keys: body.data.filter((k) => k.status === "active") });
    } catch (error) {
      this.setState({ error });
    }
  }
  show = async (e) => {
    e.preventDefault();
    if (!this.state.keyId) return;
    try {
      const body = await api("GET", `/admin/api-keys/${encodeURIComponent(this.state.keyId)}/usage`);
      this.setState({ windows: body.windows, error: null, at: Date.now() });
    } catch (error) {
      this.setState({ error });
    }
  };
  render(_, { keys, keyId, windows, error, at }) {
    return html`<section aria-labelledby="windows-title">
      <h2 id="windows-title">A key's windows now</h2>
      <form class="row card" onSubmit=${this.show} aria-label="A key's windows">
        <label for="windows-key">Key
          <select id="windows-key" value=${keyId} onChange=${(e) => this.setState({ keyId: e.currentTarget.value })}>
            <option value="">choose a key</option>
            ${keys.map((k) => html`<option value=${k.id}>${k.name ?? k.id} (${k.id})</option>`)}
          </select></label>
        <button type="submit">Show windows</button>
      </form>
      <${ErrorNote} error=${error} />
      ${
        windows
          ? html`<${Table}
            caption="Each window of each unit: used, limit, resets at"
            columns=${["Scope", "Unit", "Window", "Used", "Limit", "Remaining", "Resets at"]}
            empty="This key has no limits."
            rows=${windows.map((w) => [
              w.scope,
              w.unit,
              w.window,
              w.unit === "spend" ? fmtUsd(w.used) : fmtNum(w.used),
              w.unit === "spend" ? fmtUsd(w.limit) : fmtNum(w.limit),
              w.unit === "spend" ? fmtUsd(w.remaining) : fmtNum(w.remaining),
              fmtTime(new Date(at + w.resetsInSeconds * 1000).toISOString()),
            ])}
          />`
          : null
      }
    </section>`;
  }
}

export class UsagePage extends Component {
  constructor() {
    super();
    const q = new URLSearchParams(window.location.search);
    this.state = {
      start: q.get("start") || daysAgo(13),
      end: q.get("end") || today(),
      data: null,
      error: null,
    };
  }
  componentDidMount() {
    this.load();
  }
  async load() {
    const { start, end } = this.state;
    try {
      const [day, key, endUser, model] = await Promise.all(
        ["day", "key", "end_user", "model"].map((g) =>
          api("GET", `/usage${query({ start, end, group_by: g })}`),
        ),
      );
      // Keys by name where the session may list them; otherwise by id.
      const names = can("admin:api-keys")
        ? new Map((await api("GET", "/admin/api-keys")).data.map((k) => [k.id, k.name]))
        : new Map();
      for (const row of key.data)
        row.key_id = names.get(row.key_id) ? `${names.get(row.key_id)} (${row.key_id})` : row.key_id;
      // Guardrail decisions over the same UTC days, from the audit trail; named where the key may read the guardrail.
      const until = new Date(`${end}T00:00:00Z`);
      until.setUTCDate(until.getUTCDate() + 1);
      const guardrails = await api(
        "GET",
        `/admin/audit/guardrail-decisions${query({ since: `${start}T00:00:00Z`, until: until.toISOString() })}`,
      );
      const guardrailNames = can("guardrails:read")
        ? new Map((await api("GET", "/guardrails?limit=100")).data.map((g) => [g.id, g.name]))
        : new Map();
      for (const row of guardrails.data)
        row.label = guardrailNames.get(row.guardrail_id)
          ? `${guardrailNames.get(row.guardrail_id)} (${row.guardrail_id})`
          : row.guardrail_id;
      this.setState({ data: { day, key, endUser, model, guardrails }, error: null });
    } catch (error) {
      this.setState({ error });
    }
  }
  render(_, { start, end, data, error }) {
    const table = (caption, column, label, body) =>
      html`<${Table}
        caption=${caption}
        columns=${[label, "Requests", "Input tokens", "Output tokens", "Total tokens", "Cost"]}
        rows=${body.data.map((r) => [r[column], fmtNum(r.requests), fmtNum(r.input_tokens), fmtNum(r.output_tokens), fmtNum(r.total_tokens), fmtUsd(r.cost_usd)])}
      />`;
    const bars = (title, body, column) =>
      html`<${ChartView}
        title=${title}
        labels=${body.data.map((r) => r[column])}
        datasets=${[{ label: "Total tokens", data: body.data.map((r) => r.total_tokens), backgroundColor: "#3867d6" }]}
      />`;
    return html`<h1>Usage and spend</h1>
      <form class="row card" method="get" action="/admin/usage" aria-label="Range">
        <label for="usage-start">From (UTC day)<input id="usage-start" name="start" type="date" required value=${start} /></label>
        <label for="usage-end">To (UTC day)<input id="usage-end" name="end" type="date" required value=${end} /></label>
        <button type="submit">Show</button>
      </form>
      <${ErrorNote} error=${error} />
      ${
        data
          ? html`<section aria-labelledby="totals-title">
              <h2 id="totals-title">${session.org}, ${data.day.start} to ${data.day.end}</h2>
              <dl class="totals">
                <div><dt>Requests</dt><dd data-testid="total-requests">${fmtNum(data.day.totals.requests)}</dd></div>
                <div><dt>Tokens</dt><dd data-testid="total-tokens">${fmtNum(data.day.totals.total_tokens)}</dd></div>
                <div><dt>Cost</dt><dd data-testid="total-cost">${fmtUsd(data.day.totals.cost_usd)}</dd></div>
              </dl>
              <div class="charts">
                <${ChartView} title="Requests per day" type="line" labels=${data.day.data.map((r) => r.day)}
                  datasets=${[{ label: "Requests", data: data.day.data.map((r) => r.requests), borderColor: "#3867d6", backgroundColor: "#3867d6" }]} />
                <${ChartView} title="Tokens per day" labels=${data.day.data.map((r) => r.day)}
                  datasets=${[
                    {
                      label: "Input tokens",
                      data: data.day.data.map((r) => r.input_tokens),
                      backgroundColor: "#20bf6b",
                    },
                    {
                      label: "Output tokens",
                      data: data.day.data.map((r) => r.output_tokens),
                      backgroundColor: "#f7b731",
                    },
                  ]} />
                <${ChartView} title="Cost per day (USD)" type="line" labels=${data.day.data.map((r) => r.day)}
                  datasets=${[{ label: "Cost", data: data.day.data.map((r) => r.cost_usd), borderColor: "#eb3b5a", backgroundColor: "#eb3b5a" }]} />
              </div>
              ${table("Per day", "day", "Day", data.day)}
            </section>
            <section aria-labelledby="per-key-title"><h2 id="per-key-title">Per key</h2>${bars("Tokens per key", data.key, "key_id")}${table("Per key", "key_id", "Key", data.key)}</section>
            <section aria-labelledby="per-user-title"><h2 id="per-user-title">Per end user</h2>${bars("Tokens per end user", data.endUser, "end_user")}${table("Per end user", "end_user", "End user", data.endUser)}</section>
            <section aria-labelledby="per-model-title"><h2 id="per-model-title">Per model</h2>${bars("Tokens per model", data.model, "model")}${table("Per model", "model", "Model", data.model)}
              <${Table}
                caption="Per model and the deployment that served it: its provider and upstream model, priced at its price"
                columns=${["Model", "Provider", "Upstream model", "Requests", "Input tokens", "Output tokens", "Total tokens", "Cost"]}
                rows=${data.model.data.flatMap((m) => (m.deployments ?? []).map((d) => [m.model, d.provider, d.model, fmtNum(d.requests), fmtNum(d.input_tokens), fmtNum(d.output_tokens), fmtNum(d.total_tokens), fmtUsd(d.cost_usd)]))}
              /></section>
            <section aria-labelledby="per-guardrail-title"><h2 id="per-guardrail-title">Guardrail blocks</h2>
              <${Table}
                caption="Blocks per guardrail (redactions and flags beside them), from the audit trail"
                columns=${["Guardrail", "Blocks", "Redactions", "Flags"]}
                empty="No guardrail decided anything in this range."
                rows=${data.guardrails.data.map((g) => [g.label, fmtNum(g.block), fmtNum(g.redact), fmtNum(g.flag)])}
              /></section>`
          : error
            ? null
            : html`<p>Loading usage…</p>`
      }
      ${can("admin:api-keys") ? html`<${KeyWindows} />` : null}`;
  }
}

// ---------------------------------------------------------------- access

function auditRows(records) {
  return records.map((r) => [
    fmtTime(r.time),
    `${r.actor.userId} (${r.actor.keyId})`,
    r.action,
    `${r.resourceType}:${r.resourceId}`,
    r.subject ?? "—",
    r.role ?? "—",
    html`<span class=${`badge ${r.outcome}`}>${r.outcome}</span>`,
    r.zedToken ? html`<code class="token">${r.zedToken}</code>` : "—",
  ]);
}
const AUDIT_COLUMNS = ["When", "Who", "Action", "Resource", "Subject", "Role", "Decision", "ZedToken"];

class ResourceAccess extends Component {
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
        api("GET", `/admin/authorization/resources${path}/grants`),
        can("authorization:read")
          ? api("GET", `/authorization/llm/check${query({ resourceType, resourceId, role: "owner" })}`)
          : Promise.resolve({ allowed: false }),
      ]);
      // The resource's changes; administrators' reads of it (`inspect`) are on the audit trail page.
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
    this.setState({ revoking: null });
    try {
      await api("POST", "/authorization/llm/revoke", { ...this.ref, userId: g.userId, role: g.role });
      await this.load();
      this.setState({ notice: `Revoked ${g.role} from ${g.userId}.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  grant = async (e) => {
    e.preventDefault();
    const { grantUser, grantRole, grantExpires } = this.state;
    try {
      await api("POST", "/authorization/llm/grant", {
        ...this.ref,
        userId: grantUser.trim(),
        role: grantRole,
        ...(grantExpires ? { expiresAt: new Date(grantExpires).toISOString() } : {}),
      });
      await this.load();
      this.setState({ notice: `Granted ${grantRole} to ${grantUser.trim()}.`, grantUser: "" });
    } catch (error) {
      this.setState({ error });
    }
  };
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
            <label for="grant-user">User id (or *)<input id="grant-user" required value=${grantUser} onInput=${(e) => this.setState({ grantUser: e.currentTarget.value })} /></label>
            <label for="grant-role">Role<select id="grant-role" value=${grantRole} onChange=${(e) => this.setState({ grantRole: e.currentTarget.value })}>${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}</select></label>
            <label for="grant-expires">Expires (optional)<input id="grant-expires" type="datetime-local" value=${grantExpires} onInput=${(e) => this.setState({ grantExpires: e.currentTarget.value })} /></label>
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

class UserAccess extends Component {
  state = { results: null, error: null };
  async componentDidMount() {
    try {
      const results = await Promise.all(
        RESOURCE_TYPES.map((t) =>
          api(
            "GET",
            `/admin/authorization/users/${encodeURIComponent(this.props.userId)}/resources${query({ resourceType: t })}`,
          ),
        ),
      );
      this.setState({ results });
    } catch (error) {
      this.setState({ error });
    }
  }
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

// ---------------------------------------------------------------- audit trail

export class AuditPage extends Component {
  constructor() {
    super();
    const q = new URLSearchParams(window.location.search);
    this.filters = {};
    for (const f of ["actor", "resourceType", "resourceId", "action", "since", "until", "cursor"])
      this.filters[f] = q.get(f) ?? "";
    this.state = { page: null, error: null };
  }
  async componentDidMount() {
    const f = this.filters;
    try {
      const page = await api(
        "GET",
        `/admin/audit${query({
          ...f,
          since: f.since ? new Date(f.since).toISOString() : "",
          until: f.until ? new Date(f.until).toISOString() : "",
          limit: 25,
        })}`,
      );
      this.setState({ page });
    } catch (error) {
      this.setState({ error });
    }
  }
  render(_, { page, error }) {
    const f = this.filters;
    const next = page?.next_cursor ? `/admin/audit${query({ ...f, cursor: page.next_cursor })}` : null;
    return html`<h1>Audit trail</h1>
      <form class="card filters" method="get" action="/admin/audit" aria-label="Filter the audit trail">
        <label for="f-actor">Actor (user id)<input id="f-actor" name="actor" value=${f.actor} /></label>
        <label for="f-type">Resource type<select id="f-type" name="resourceType"><option value="">any</option>${RESOURCE_TYPES.map((t) => html`<option value=${t} selected=${t === f.resourceType}>${t}</option>`)}</select></label>
        <label for="f-id">Resource id<input id="f-id" name="resourceId" value=${f.resourceId} /></label>
        <label for="f-action">Action<select id="f-action" name="action"><option value="">any</option>${["register", "delete", "grant", "revoke", "inspect", "call", "act_as_key_owner"].map((a) => html`<option value=${a} selected=${a === f.action}>${a}</option>`)}</select></label>
        <label for="f-since">From (UTC)<input id="f-since" name="since" type="datetime-local" value=${f.since} /></label>
        <label for="f-until">Until (UTC)<input id="f-until" name="until" type="datetime-local" value=${f.until} /></label>
        <button type="submit">Filter</button>
      </form>
      <${ErrorNote} error=${error} />
      ${page ? html`<${Table} caption="The organization's audit trail, newest first" columns=${AUDIT_COLUMNS} rows=${auditRows(page.data)} empty="No records." />` : null}
      <nav class="row" aria-label="Pages">
        ${f.cursor ? html`<a href=${`/admin/audit${query({ ...f, cursor: "" })}`}>Newest</a>` : null}
        ${next ? html`<a href=${next}>Older records</a>` : null}
      </nav>`;
  }
}

// ---------------------------------------------------------------- eval schedules

export class EvalsPage extends Component {
  state = { schedules: null, runs: {}, error: null, deleting: null, notice: "" };
  componentDidMount() {
    this.load();
  }
  async load() {
    try {
      const body = await api("GET", "/llm/evals/schedules?limit=100");
      this.setState({ schedules: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  showRuns = async (s) => {
    try {
      const body = await api("GET", `/llm/evals/schedules/${encodeURIComponent(s.id)}/runs?limit=20`);
      this.setState({ runs: { ...this.state.runs, [s.id]: body.data } });
    } catch (error) {
      this.setState({ error });
    }
  };
  remove = async () => {
    const s = this.state.deleting;
    this.setState({ deleting: null });
    try {
      await api("DELETE", `/llm/evals/schedules/${encodeURIComponent(s.id)}`);
      await this.load();
      this.setState({ notice: `Schedule ${s.name ?? s.id} deleted; its runs are kept.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  render(_, { schedules, runs, error, deleting, notice }) {
    return html`<h1>Eval schedules</h1>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      ${
        schedules
          ? html`<${Table}
            caption="The organization's eval schedules"
            columns=${["Name", "Id", "Model", "Cadence", "Created", "Next run", "Actions"]}
            empty="No eval schedules."
            rows=${schedules.map((s) => [
              s.name ?? "—",
              html`<code>${s.id}</code>`,
              s.model,
              s.cron
                ? `${s.cron}${s.timezone ? ` (${s.timezone})` : ""}`
                : s.every_seconds
                  ? `every ${s.every_seconds} s`
                  : "—",
              fmtUnix(s.created_at),
              fmtUnix(s.next_run_at),
              html`<div class="row">
                <button type="button" onClick=${() => this.showRuns(s)} aria-label=${`Runs of ${s.name ?? s.id}`}>Runs</button>
                ${can("evals:write") ? html`<button type="button" class="danger" onClick=${() => this.setState({ deleting: s })} aria-label=${`Delete ${s.name ?? s.id}`}>Delete</button>` : null}
              </div>`,
            ])}
          />`
          : null
      }
      ${Object.entries(runs).map(
        ([id, list]) => html`<${Table}
          caption=${`Runs of ${id}`}
          columns=${["Run", "Status", "Created", "Completed", "Tokens", "Error"]}
          empty="No runs yet."
          rows=${list.map((r) => [html`<code>${r.id}</code>`, r.status, fmtUnix(r.created_at), fmtUnix(r.completed_at), fmtNum(r.usage?.total_tokens), r.error ? String(r.error.message ?? r.error) : "—"])}
        />`,
      )}
      ${
        deleting
          ? html`<${Confirm} title="Delete this schedule?" text=${`${deleting.name ?? deleting.id} stops running; its past runs are kept.`} confirmLabel="Yes, delete" onConfirm=${this.remove} onCancel=${() => this.setState({ deleting: null })} />`
          : null
      }`;
  }
}

// ---------------------------------------------------------------- tool servers (MCP)

/** A date the MCP API gives as Unix seconds or as an ISO string. */
const fmtWhen = (v) => (typeof v === "number" ? fmtUnix(v) : fmtTime(v));

export class ToolsPage extends Component {
  state = { servers: null, detail: {}, error: null };
  async componentDidMount() {
    try {
      const body = await api("GET", "/mcp/servers?limit=100");
      this.setState({ servers: body.data ?? [] });
    } catch (error) {
      this.setState({ error });
    }
  }
  open = async (s) => {
    const id = encodeURIComponent(s.id);
    try {
      // A server's tools and their roles are for its owners: asked only where a check says so.
      const owner = can("authorization:read")
        ? (
            await api(
              "GET",
              `/authorization/llm/check${query({ resourceType: "mcp_server", resourceId: s.id, role: "owner" })}`,
            )
          ).allowed
        : false;
      // Credentials first: listing the tools calls the server with one, and the table shows the
      // credentials as they were before this view's own call (read at once, it showed that call or not by chance).
      const credentials = await api("GET", `/mcp/servers/${id}/credentials`);
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
              fmtWhen(s.created_at),
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
            rows=${d.credentials.map((c) => [c.scope, c.type, c.name ?? "—", fmtWhen(c.created_at), c.last_used_at ? fmtWhen(c.last_used_at) : "never"])} />
        </section>`,
      )}
      ${can("admin:api-keys") ? html`<${AuthorizedClients} />` : null}`;
  }
}

/** MCP clients the organization's users let act for them with OAuth (docs/api/mcp-oauth.md): revoking one ends its next call. */
class AuthorizedClients extends Component {
  state = { grants: null, error: null, revoking: null, notice: null };
  componentDidMount() {
    this.load();
  }
  load = async () => {
    try {
      const body = await api("GET", "/admin/mcp-oauth/grants");
      this.setState({ grants: body.data ?? [] });
    } catch (error) {
      this.setState({ error });
    }
  };
  revoke = async () => {
    const g = this.state.revoking;
    this.setState({ revoking: null, error: null });
    try {
      await api("DELETE", `/admin/mcp-oauth/grants/${encodeURIComponent(g.id)}`);
      await this.load();
      this.setState({ notice: `${g.clientName ?? g.clientId} can no longer act for ${g.userId}.` });
    } catch (error) {
      this.setState({ error });
    }
  };
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

// ---------------------------------------------------------------- guardrails

const GUARDRAIL_EXAMPLE = '[{"type": "ban_words", "words": ["example"]}, {"type": "prompt_injection"}]';

/** Attachments as the form edits them: one line each, `organization`, `key:<id>` or `model:<name>`. */
const attachmentLines = (list) =>
  list
    .map((a) =>
      a.scope === "organization"
        ? "organization"
        : a.scope === "key"
          ? `key:${a.key_id}`
          : `model:${a.model}`,
    )
    .join("\n");

function parseAttachments(text) {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      if (l === "organization") return { scope: "organization" };
      if (l.startsWith("key:")) return { scope: "key", key_id: l.slice(4).trim() };
      if (l.startsWith("model:")) return { scope: "model", model: l.slice(6).trim() };
      throw new Error(`"${l}" is not organization, key:<id> or model:<name>`);
    });
}

class GuardrailForm extends Component {
  constructor(props) {
    super(props);
    const g = props.existing;
    this.state = {
      name: g?.name ?? "",
      checks: g ? JSON.stringify(g.checks, null, 2) : GUARDRAIL_EXAMPLE,
      applies_to: g?.applies_to ?? "both",
      action: g?.action ?? "block",
      error: null,
      busy: false,
    };
  }
  submit = async (e) => {
    e.preventDefault();
    const { name, checks, applies_to, action } = this.state;
    this.setState({ busy: true, error: null });
    try {
      let parsed;
      try {
        parsed = JSON.parse(checks);
      } catch {
        throw new Error("Checks must be a JSON array of checks");
      }
      await this.props.onSubmit({ name: name.trim(), checks: parsed, applies_to, action });
    } catch (error) {
      this.setState({ error });
    } finally {
      this.setState({ busy: false });
    }
  };
  render({ existing, onCancel }, { name, checks, applies_to, action, error, busy }) {
    const p = existing ? `gr-${existing.id}-` : "gr-new-";
    return html`<form class="card" onSubmit=${this.submit} aria-label=${existing ? `Change guardrail ${existing.id}` : "Create a guardrail"}>
      <h3>${existing ? `Change ${existing.name}` : "Create a guardrail"}</h3>
      <div class="grid">
        <label for=${`${p}name`}>Name (shown to callers it blocks)<input id=${`${p}name`} required maxlength="256" value=${name} onInput=${(e) => this.setState({ name: e.currentTarget.value })} /></label>
        <label for=${`${p}applies`}>Applies to
          <select id=${`${p}applies`} value=${applies_to} onChange=${(e) => this.setState({ applies_to: e.currentTarget.value })}>
            <option value="input">input</option><option value="output">output</option><option value="both">both</option>
          </select></label>
        <label for=${`${p}action`}>Action
          <select id=${`${p}action`} value=${action} onChange=${(e) => this.setState({ action: e.currentTarget.value })}>
            <option value="block">block</option><option value="redact">redact</option><option value="flag">flag</option>
          </select></label>
      </div>
      <label for=${`${p}checks`}>Checks (JSON)<textarea id=${`${p}checks`} rows="6" spellcheck="false" value=${checks} onInput=${(e) => this.setState({ checks: e.currentTarget.value })}></textarea></label>
      <${ErrorNote} error=${error} />
      <div class="row">
        <button type="submit" disabled=${busy}>${existing ? "Save changes" : "Create guardrail"}</button>
        ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      </div>
    </form>`;
  }
}

/** One guardrail opened: its attachments (edited as lines) and "try a text". */
class GuardrailDetail extends Component {
  state = {
    attachments: null,
    lines: "",
    text: "",
    direction: "input",
    result: null,
    error: null,
    notice: "",
  };
  componentDidMount() {
    this.load();
  }
  async load() {
    try {
      const body = await api("GET", `/guardrails/${encodeURIComponent(this.props.guardrail.id)}/attachments`);
      this.setState({ attachments: body.attachments, lines: attachmentLines(body.attachments) });
    } catch (error) {
      this.setState({ error });
    }
  }
  saveAttachments = async (e) => {
    e.preventDefault();
    this.setState({ error: null, notice: "" });
    try {
      const body = await api(
        "PUT",
        `/guardrails/${encodeURIComponent(this.props.guardrail.id)}/attachments`,
        {
          attachments: parseAttachments(this.state.lines),
        },
      );
      this.setState({
        attachments: body.attachments,
        lines: attachmentLines(body.attachments),
        notice: body.attachments.length ? "Attachments saved." : "Detached everywhere.",
      });
    } catch (error) {
      this.setState({ error });
    }
  };
  tryText = async (e) => {
    e.preventDefault();
    this.setState({ error: null, result: null });
    try {
      const body = await api("POST", `/guardrails/${encodeURIComponent(this.props.guardrail.id)}/evaluate`, {
        text: this.state.text,
        direction: this.state.direction,
      });
      this.setState({ result: body.decisions });
    } catch (error) {
      this.setState({ error });
    }
  };
  render({ guardrail: g }, { attachments, lines, text, direction, result, error, notice }) {
    const p = `gr-${g.id}-`;
    return html`<section aria-label=${`Guardrail ${g.name}`}>
      <h2>${g.name}</h2>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      ${
        attachments
          ? html`<form class="card" onSubmit=${this.saveAttachments} aria-label=${`Attachments of ${g.name}`}>
            <label for=${`${p}attachments`}><span>Attached to (one a line: <code>organization</code>, <code>key:key_…</code>, <code>model:gpt-4o</code>; empty: nowhere)</span>
              <textarea id=${`${p}attachments`} rows="4" spellcheck="false" value=${lines} readonly=${!can("guardrails:write")} onInput=${(e) => this.setState({ lines: e.currentTarget.value })}></textarea></label>
            ${can("guardrails:write") ? html`<div class="row"><button type="submit">Save attachments</button></div>` : null}
          </form>`
          : null
      }
      <form class="card" onSubmit=${this.tryText} aria-label=${`Try a text against ${g.name}`}>
        <label for=${`${p}text`}>Try a text (checked, never stored)<textarea id=${`${p}text`} rows="3" value=${text} onInput=${(e) => this.setState({ text: e.currentTarget.value })}></textarea></label>
        <label for=${`${p}direction`}>As
          <select id=${`${p}direction`} value=${direction} onChange=${(e) => this.setState({ direction: e.currentTarget.value })}>
            <option value="input">input (what the model reads)</option><option value="output">output (what it answers)</option>
          </select></label>
        <div class="row"><button type="submit">Try</button></div>
      </form>
      ${
        result
          ? html`<${Table} caption=${`What ${g.name} finds in the text`} columns=${["Check", "Position", "Action", "Found"]}
            empty="No check found anything: the text passes."
            rows=${result.map((d) => [d.check, String(d.check_index + 1), d.action, d.kinds.join(", ") || "—"])} />`
          : null
      }
    </section>`;
  }
}

export class GuardrailsPage extends Component {
  state = {
    guardrails: null,
    creating: false,
    editing: null,
    open: null,
    deleting: null,
    error: null,
    notice: "",
  };
  componentDidMount() {
    this.load();
  }
  async load() {
    try {
      const body = await api("GET", "/guardrails?limit=100");
      this.setState({ guardrails: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  create = async (body) => {
    const made = await api("POST", "/guardrails", body);
    this.setState({
      creating: false,
      notice: `Guardrail ${made.name} created; it applies to no call until attached.`,
    });
    await this.load();
  };
  update = async (body) => {
    const g = this.state.editing;
    await api("PATCH", `/guardrails/${encodeURIComponent(g.id)}`, body);
    this.setState({ editing: null, notice: `Guardrail ${body.name} saved.` });
    await this.load();
  };
  remove = async () => {
    const g = this.state.deleting;
    this.setState({ deleting: null, error: null });
    try {
      await api("DELETE", `/guardrails/${encodeURIComponent(g.id)}`);
      this.setState({
        open: this.state.open?.id === g.id ? null : this.state.open,
        notice: `Guardrail ${g.name} deleted.`,
      });
      await this.load();
    } catch (error) {
      this.setState({ error });
    }
  };
  render(_, { guardrails, creating, editing, open, deleting, error, notice }) {
    const writer = can("guardrails:write");
    return html`<h1>Guardrails</h1>
      ${notice ? html`<${Status} text=${notice} />` : null}
      <${ErrorNote} error=${error} />
      ${writer && !creating ? html`<div class="row"><button type="button" onClick=${() => this.setState({ creating: true, editing: null })}>New guardrail</button></div>` : null}
      ${creating ? html`<${GuardrailForm} onSubmit=${this.create} onCancel=${() => this.setState({ creating: false })} />` : null}
      ${editing ? html`<${GuardrailForm} key=${editing.id} existing=${editing} onSubmit=${this.update} onCancel=${() => this.setState({ editing: null })} />` : null}
      ${
        guardrails
          ? html`<${Table}
            caption="The guardrails this key may read"
            columns=${["Name", "Id", "Checks", "Applies to", "Action", "Created", "Actions"]}
            empty="No guardrails."
            rows=${guardrails.map((g) => [
              g.name,
              html`<a href=${`/admin/access${query({ resourceType: "guardrail", resourceId: g.id })}`} aria-label=${`Who holds which role on ${g.name}`}><code>${g.id}</code></a>`,
              g.checks.map((c) => c.type).join(", "),
              g.applies_to,
              g.action,
              fmtUnix(g.created_at),
              html`<div class="row">
                <button type="button" onClick=${() => this.setState({ open: g })} aria-label=${`Attachments of ${g.name} and try a text`}>Attach and try</button>
                ${writer ? html`<button type="button" onClick=${() => this.setState({ editing: g, creating: false })} aria-label=${`Change ${g.name}`}>Change</button>` : null}
                ${writer ? html`<button type="button" class="danger" onClick=${() => this.setState({ deleting: g })} aria-label=${`Delete ${g.name}`}>Delete</button>` : null}
              </div>`,
            ])}
          />`
          : null
      }
      ${open ? html`<${GuardrailDetail} key=${open.id} guardrail=${open} />` : null}
      ${
        deleting
          ? html`<${Confirm} title="Delete this guardrail?" text=${`${deleting.name} is detached everywhere and deleted.`} confirmLabel="Yes, delete" onConfirm=${this.remove} onCancel=${() => this.setState({ deleting: null })} />`
          : null
      }`;
  }
}

export { ApiError };
