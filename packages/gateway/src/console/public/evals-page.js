// The eval schedules page: the organization's scheduled evals and their runs.
import { api, Component, Confirm, can, ErrorNote, fmtNum, fmtUnix, html, Status, Table } from "./ui.js";

/** @import { EvalRun, EvalSchedule, List } from "../api-types" */

/**
 * @typedef {object} EvalsPageState
 * @property {EvalSchedule[] | null} schedules None until they are read.
 * @property {Record<string, EvalRun[]>} runs The runs shown, by schedule id.
 * @property {unknown} error
 * @property {EvalSchedule | null} deleting The schedule whose deletion waits for the user's confirmation.
 * @property {string} notice
 */

/** @extends {Component<{}, EvalsPageState>} */
export class EvalsPage extends Component {
  /** @type {EvalsPageState} */
  state = {
    schedules: null,
    runs: {},
    error: null,
    deleting: null,
    notice: "",
  };
  componentDidMount() {
    this.load();
  }
  async load() {
    try {
      /** @type {List<EvalSchedule>} */
      const body = await api("GET", "/llm/evals/schedules?limit=100");
      this.setState({ schedules: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  showRuns = async (/** @type {EvalSchedule} */ s) => {
    try {
      /** @type {List<EvalRun>} */
      const body = await api("GET", `/llm/evals/schedules/${encodeURIComponent(s.id)}/runs?limit=20`);
      this.setState({ runs: { ...this.state.runs, [s.id]: body.data } });
    } catch (error) {
      this.setState({ error });
    }
  };
  remove = async () => {
    const s = this.state.deleting;
    if (!s) return;
    this.setState({ deleting: null });
    try {
      await api("DELETE", `/llm/evals/schedules/${encodeURIComponent(s.id)}`);
      await this.load();
      this.setState({ notice: `Schedule ${s.name ?? s.id} deleted; its runs are kept.` });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{}} _
   * @param {EvalsPageState} state
   */
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
          rows=${list.map((r) => [html`<code>${r.id}</code>`, r.status, fmtUnix(r.created_at), fmtUnix(r.completed_at), fmtNum(r.usage?.total_tokens), r.error || "—"])}
        />`,
      )}
      ${
        deleting
          ? html`<${Confirm} title="Delete this schedule?" text=${`${deleting.name ?? deleting.id} stops running; its past runs are kept.`} confirmLabel="Yes, delete" onConfirm=${this.remove} onCancel=${() => this.setState({ deleting: null })} />`
          : null
      }`;
  }
}
