// The usage and spend page: requests, tokens and spend over days, by key, model or user.
import {
  api,
  ChartView,
  Component,
  can,
  ErrorNote,
  fmtNum,
  fmtTime,
  fmtUsd,
  html,
  query,
  session,
  Table,
} from "./ui.js";

/** @import { FieldEvent } from "../browser" */
/** @import { ApiKey, Guardrail, GuardrailDecisionCount, KeyUsage, KeyUsageWindow, List, UsageReport, UsageRow } from "../api-types" */

const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (/** @type {number} */ n) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);

/**
 * @typedef {object} KeyWindowsState
 * @property {ApiKey[]} keys The active keys to choose from.
 * @property {string} keyId The key chosen (`""`: none yet).
 * @property {KeyUsageWindow[] | null} windows
 * @property {unknown} error
 * @property {number} at When the windows were read (ms since the epoch): their resets are counted from it.
 */

/**
 * A key's limit windows now: used, limit, remaining, reset.
 * @extends {Component<{}, KeyWindowsState>}
 */
class KeyWindows extends Component {
  /** @type {KeyWindowsState} */
  state = { keys: [], keyId: "", windows: null, error: null, at: 0 };
  async componentDidMount() {
    try {
      /** @type {List<ApiKey>} */
      const body = await api("GET", "/admin/api-keys");
      this.setState({ keys: body.data.filter((k) => k.status === "active") });
    } catch (error) {
      this.setState({ error });
    }
  }
  show = async (/** @type {Event} */ e) => {
    e.preventDefault();
    if (!this.state.keyId) return;
    try {
      /** @type {KeyUsage} */
      const body = await api("GET", `/admin/api-keys/${encodeURIComponent(this.state.keyId)}/usage`);
      this.setState({ windows: body.windows, error: null, at: Date.now() });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{}} _
   * @param {KeyWindowsState} state
   */
  render(_, { keys, keyId, windows, error, at }) {
    return html`<section aria-labelledby="windows-title">
      <h2 id="windows-title">A key's windows now</h2>
      <form class="row card" onSubmit=${this.show} aria-label="A key's windows">
        <label for="windows-key">Key
          <select id="windows-key" value=${keyId} onChange=${(/** @type {FieldEvent} */ e) => this.setState({ keyId: e.currentTarget.value })}>
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

/**
 * The usage of the range, one report per grouping, and the guardrails' decisions over the same days.
 * @typedef {{ day: UsageReport, key: UsageReport, endUser: UsageReport, model: UsageReport, guardrails: List<GuardrailDecisionCount> }} UsageData
 */

/**
 * @typedef {object} UsagePageState
 * @property {string} start The range's first UTC day (`YYYY-MM-DD`).
 * @property {string} end Its last.
 * @property {UsageData | null} data None until it is read.
 * @property {unknown} error
 */

/** @extends {Component<{}, UsagePageState>} */
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
        ["day", "key", "end_user", "model"].map(
          (g) =>
            /** @type {Promise<UsageReport>} */ (api("GET", `/usage${query({ start, end, group_by: g })}`)),
        ),
      );
      // Keys by name where the session may list them; otherwise by id.
      const names = can("admin:api-keys")
        ? new Map(
            /** @type {List<ApiKey>} */ (await api("GET", "/admin/api-keys")).data.map((k) => [k.id, k.name]),
          )
        : new Map();
      for (const row of key.data)
        row.key_id = names.get(row.key_id) ? `${names.get(row.key_id)} (${row.key_id})` : row.key_id;
      // Guardrail decisions over the same UTC days, from the audit trail; named where the key may read the guardrail.
      const until = new Date(`${end}T00:00:00Z`);
      until.setUTCDate(until.getUTCDate() + 1);
      /** @type {List<GuardrailDecisionCount>} */
      const guardrails = await api(
        "GET",
        `/admin/audit/guardrail-decisions${query({ since: `${start}T00:00:00Z`, until: until.toISOString() })}`,
      );
      const guardrailNames = can("guardrails:read")
        ? new Map(
            /** @type {List<Guardrail>} */ (await api("GET", "/guardrails?limit=100")).data.map((g) => [
              g.id,
              g.name,
            ]),
          )
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
  /**
   * @param {{}} _
   * @param {UsagePageState} state
   */
  render(_, { start, end, data, error }) {
    /**
     * A report's rows as a table, the group's column first.
     * @param {string} caption
     * @param {"day" | "key_id" | "end_user" | "model"} column
     * @param {string} label
     * @param {UsageReport} body
     */
    const table = (caption, column, label, body) =>
      html`<${Table}
        caption=${caption}
        columns=${[label, "Requests", "Input tokens", "Output tokens", "Total tokens", "Cost"]}
        rows=${body.data.map((r) => [r[column], fmtNum(r.requests), fmtNum(r.input_tokens), fmtNum(r.output_tokens), fmtNum(r.total_tokens), fmtUsd(r.cost_usd)])}
      />`;
    /**
     * A report's total tokens as bars, one per group.
     * @param {string} title
     * @param {UsageReport} body
     * @param {"key_id" | "end_user" | "model"} column
     */
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
