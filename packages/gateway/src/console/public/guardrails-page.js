// The guardrails page: the organization's guardrails, where they are attached, and trying one on a text.
import { api, Component, Confirm, can, ErrorNote, fmtUnix, html, query, Status, Table } from "./ui.js";

/** @import { FieldEvent } from "../browser" */
/** @import { Guardrail, GuardrailAttachment, GuardrailAttachments, GuardrailBody, GuardrailDecision, GuardrailEvaluation, List } from "../api-types" */

const GUARDRAIL_EXAMPLE = '[{"type": "ban_words", "words": ["example"]}, {"type": "prompt_injection"}]';

/** Attachments as the form edits them: one line each, `organization`, `key:<id>` or `model:<name>`. */
const attachmentLines = (/** @type {GuardrailAttachment[]} */ list) =>
  list
    .map((a) =>
      a.scope === "organization"
        ? "organization"
        : a.scope === "key"
          ? `key:${a.key_id}`
          : `model:${a.model}`,
    )
    .join("\n");

/**
 * The form's lines as attachments; a line that names none is an error the form shows.
 * @param {string} text
 * @returns {GuardrailAttachment[]}
 */
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

/**
 * @typedef {object} GuardrailFormProps
 * @property {Guardrail} [existing] The guardrail to change; none: a form for a new one.
 * @property {(body: GuardrailBody) => Promise<void>} onSubmit
 * @property {() => void} [onCancel]
 */

/**
 * @typedef {object} GuardrailFormState
 * @property {string} name
 * @property {string} checks The checks as JSON text.
 * @property {string} applies_to
 * @property {string} action
 * @property {unknown} error
 * @property {boolean} busy
 */

/**
 * A guardrail's fields, for creating or changing one.
 * @extends {Component<GuardrailFormProps, GuardrailFormState>}
 */
class GuardrailForm extends Component {
  /** @param {GuardrailFormProps} props */
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
  submit = async (/** @type {Event} */ e) => {
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
  /**
   * @param {GuardrailFormProps} props
   * @param {GuardrailFormState} state
   */
  render({ existing, onCancel }, { name, checks, applies_to, action, error, busy }) {
    const p = existing ? `gr-${existing.id}-` : "gr-new-";
    return html`<form class="card" onSubmit=${this.submit} aria-label=${existing ? `Change guardrail ${existing.id}` : "Create a guardrail"}>
      <h3>${existing ? `Change ${existing.name}` : "Create a guardrail"}</h3>
      <div class="grid">
        <label for=${`${p}name`}>Name (shown to callers it blocks)<input id=${`${p}name`} required maxlength="256" value=${name} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ name: e.currentTarget.value })} /></label>
        <label for=${`${p}applies`}>Applies to
          <select id=${`${p}applies`} value=${applies_to} onChange=${(/** @type {FieldEvent} */ e) => this.setState({ applies_to: e.currentTarget.value })}>
            <option value="input">input</option><option value="output">output</option><option value="both">both</option>
          </select></label>
        <label for=${`${p}action`}>Action
          <select id=${`${p}action`} value=${action} onChange=${(/** @type {FieldEvent} */ e) => this.setState({ action: e.currentTarget.value })}>
            <option value="block">block</option><option value="redact">redact</option><option value="flag">flag</option>
          </select></label>
      </div>
      <label for=${`${p}checks`}>Checks (JSON)<textarea id=${`${p}checks`} rows="6" spellcheck="false" value=${checks} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ checks: e.currentTarget.value })}></textarea></label>
      <${ErrorNote} error=${error} />
      <div class="row">
        <button type="submit" disabled=${busy}>${existing ? "Save changes" : "Create guardrail"}</button>
        ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      </div>
    </form>`;
  }
}

/**
 * @typedef {object} GuardrailDetailState
 * @property {GuardrailAttachment[] | null} attachments None until they are read.
 * @property {string} lines The attachments as the form edits them.
 * @property {string} text The text to try.
 * @property {string} direction
 * @property {GuardrailDecision[] | null} result
 * @property {unknown} error
 * @property {string} notice
 */

/**
 * One guardrail opened: its attachments (edited as lines) and "try a text".
 * @extends {Component<{ guardrail: Guardrail }, GuardrailDetailState>}
 */
class GuardrailDetail extends Component {
  /** @type {GuardrailDetailState} */
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
      /** @type {GuardrailAttachments} */
      const body = await api("GET", `/guardrails/${encodeURIComponent(this.props.guardrail.id)}/attachments`);
      this.setState({ attachments: body.attachments, lines: attachmentLines(body.attachments) });
    } catch (error) {
      this.setState({ error });
    }
  }
  saveAttachments = async (/** @type {Event} */ e) => {
    e.preventDefault();
    this.setState({ error: null, notice: "" });
    try {
      /** @type {GuardrailAttachments} */
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
  tryText = async (/** @type {Event} */ e) => {
    e.preventDefault();
    this.setState({ error: null, result: null });
    try {
      /** @type {GuardrailEvaluation} */
      const body = await api("POST", `/guardrails/${encodeURIComponent(this.props.guardrail.id)}/evaluate`, {
        text: this.state.text,
        direction: this.state.direction,
      });
      this.setState({ result: body.decisions });
    } catch (error) {
      this.setState({ error });
    }
  };
  /**
   * @param {{ guardrail: Guardrail }} props
   * @param {GuardrailDetailState} state
   */
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
              <textarea id=${`${p}attachments`} rows="4" spellcheck="false" value=${lines} readonly=${!can("guardrails:write")} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ lines: e.currentTarget.value })}></textarea></label>
            ${can("guardrails:write") ? html`<div class="row"><button type="submit">Save attachments</button></div>` : null}
          </form>`
          : null
      }
      <form class="card" onSubmit=${this.tryText} aria-label=${`Try a text against ${g.name}`}>
        <label for=${`${p}text`}>Try a text (checked, never stored)<textarea id=${`${p}text`} rows="3" value=${text} onInput=${(/** @type {FieldEvent} */ e) => this.setState({ text: e.currentTarget.value })}></textarea></label>
        <label for=${`${p}direction`}>As
          <select id=${`${p}direction`} value=${direction} onChange=${(/** @type {FieldEvent} */ e) => this.setState({ direction: e.currentTarget.value })}>
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

/**
 * @typedef {object} GuardrailsPageState
 * @property {Guardrail[] | null} guardrails None until they are read.
 * @property {boolean} creating
 * @property {Guardrail | null} editing
 * @property {Guardrail | null} open The guardrail whose attachments and "try a text" are shown.
 * @property {Guardrail | null} deleting The guardrail whose deletion waits for the user's confirmation.
 * @property {unknown} error
 * @property {string} notice
 */

/** @extends {Component<{}, GuardrailsPageState>} */
export class GuardrailsPage extends Component {
  /** @type {GuardrailsPageState} */
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
      /** @type {List<Guardrail>} */
      const body = await api("GET", "/guardrails?limit=100");
      this.setState({ guardrails: body.data });
    } catch (error) {
      this.setState({ error });
    }
  }
  create = async (/** @type {GuardrailBody} */ body) => {
    /** @type {Guardrail} */
    const made = await api("POST", "/guardrails", body);
    this.setState({
      creating: false,
      notice: `Guardrail ${made.name} created; it applies to no call until attached.`,
    });
    await this.load();
  };
  update = async (/** @type {GuardrailBody} */ body) => {
    const g = this.state.editing;
    if (!g) return;
    await api("PATCH", `/guardrails/${encodeURIComponent(g.id)}`, body);
    this.setState({ editing: null, notice: `Guardrail ${body.name} saved.` });
    await this.load();
  };
  remove = async () => {
    const g = this.state.deleting;
    if (!g) return;
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
  /**
   * @param {{}} _
   * @param {GuardrailsPageState} state
   */
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
