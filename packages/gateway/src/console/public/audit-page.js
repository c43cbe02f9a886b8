// The audit trail page: the organization's authorization changes and inspections, filtered.

import { AUDIT_ACTIONS, AUDIT_COLUMNS, auditRows, RESOURCE_TYPES } from "./audit-records.js";
import { api, Component, ErrorNote, html, query, Table, utcFromField } from "./ui.js";

/** @import { AuditPage as AuditRecordsPage } from "../api-types" */

const FILTERS = /** @type {const} */ ([
  "actor",
  "resourceType",
  "resourceId",
  "action",
  "since",
  "until",
  "cursor",
]);

/**
 * @typedef {object} AuditPageState
 * @property {AuditRecordsPage | null} page None until it is read.
 * @property {unknown} error
 */

/** @extends {Component<{}, AuditPageState>} */
export class AuditPage extends Component {
  constructor() {
    super();
    const q = new URLSearchParams(window.location.search);
    /** The filters of the page's address (`""`: none). */
    this.filters = /** @type {Record<(typeof FILTERS)[number], string>} */ ({});
    for (const f of FILTERS) this.filters[f] = q.get(f) ?? "";
    this.state = { page: null, error: null };
  }
  async componentDidMount() {
    const f = this.filters;
    try {
      /** @type {AuditRecordsPage} */
      const page = await api(
        "GET",
        `/admin/audit${query({
          ...f,
          since: f.since ? utcFromField(f.since) : "",
          until: f.until ? utcFromField(f.until) : "",
          limit: 25,
        })}`,
      );
      this.setState({ page });
    } catch (error) {
      this.setState({ error });
    }
  }
  /**
   * @param {{}} _
   * @param {AuditPageState} state
   */
  render(_, { page, error }) {
    const f = this.filters;
    const next = page?.next_cursor ? `/admin/audit${query({ ...f, cursor: page.next_cursor })}` : null;
    return html`<h1>Audit trail</h1>
      <form class="card filters" method="get" action="/admin/audit" aria-label="Filter the audit trail">
        <label for="f-actor">Actor (user id)<input id="f-actor" name="actor" value=${f.actor} /></label>
        <label for="f-type">Resource type<select id="f-type" name="resourceType"><option value="">any</option>${RESOURCE_TYPES.map((t) => html`<option value=${t} selected=${t === f.resourceType}>${t}</option>`)}</select></label>
        <label for="f-id">Resource id<input id="f-id" name="resourceId" value=${f.resourceId} /></label>
        <label for="f-action">Action<select id="f-action" name="action"><option value="">any</option>${AUDIT_ACTIONS.map((a) => html`<option value=${a} selected=${a === f.action}>${a}</option>`)}</select></label>
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
