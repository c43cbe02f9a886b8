// Shared pieces of the console's pages: the API client, htm bound to Preact, small widgets.
// Everything is rendered through Preact, which sets text as text: nothing here builds HTML from strings.
import htm from "../vendor/htm.mjs";
import { Component, h, render } from "../vendor/preact.mjs";

/** @import { ComponentChildren } from "../vendor/preact.mjs" */

export const html = htm.bind(h);
export { Component, render };

/**
 * An element the shell always renders (`pages.ts`): one missing is the shell's fault, said here at once.
 * @param {string} id
 */
export function shellElement(id) {
  const element = document.getElementById(id);
  if (!element) throw new Error(`The console's page has no #${id}`);
  return element;
}

/** A space-separated `data-` list of the shell's, as its entries. */
const words = (/** @type {string | undefined} */ text) => (text ?? "").split(" ").filter(Boolean);

const root = shellElement("console");
export const session = {
  org: root.dataset.org,
  user: root.dataset.user,
  keyId: root.dataset.keyId,
  permissions: new Set(words(root.dataset.permissions)),
  allPermissions: words(root.dataset.allPermissions),
  defaultPermissions: words(root.dataset.defaultPermissions),
  mcp: root.dataset.mcp === "1",
};
export const can = (/** @type {string} */ permission) => session.permissions.has(permission);
const csrf = /** @type {HTMLMetaElement} */ (document.querySelector('meta[name="csrf-token"]')).content;

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {any} body The answer's JSON, whatever its shape: the error catalogue's, a validation's `detail` list, or none.
   */
  constructor(status, body) {
    const detail = Array.isArray(body?.detail)
      ? body.detail
          .map(
            (/** @type {{ loc?: unknown[], msg: string }} */ d) =>
              `${(d.loc ?? []).slice(1).join(".")}: ${d.msg}`,
          )
          .join("; ")
      : undefined;
    super(detail ?? body?.message ?? body?.error?.message ?? body?.error ?? `HTTP ${status}`);
    this.status = status;
  }
}

/**
 * The gateway's JSON API, as the session's key: `/admin/api/v1` + the API's own path.
 * The caller names the answer's type (`api-types.d.ts`); nothing checks it at run time.
 * @template T
 * @param {"GET" | "POST" | "PUT" | "PATCH" | "DELETE"} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<T>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  const res = await fetch(`/admin/api/v1${path}`, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) {
    window.location.assign("/admin/sign-in");
    throw new ApiError(401, { message: "The session has ended" });
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

/** `?a=1&b=2` of the parameters that have a value; `""` when none has. */
export const query = (/** @type {Record<string, string | number | null | undefined>} */ params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
};

/**
 * A `datetime-local` field's value ("YYYY-MM-DDTHH:MM"), which the console labels UTC, as an ISO instant:
 * read as UTC whatever the browser's time zone (`new Date(value)` would read it as local time).
 * @param {string} value
 */
export const utcFromField = (value) => new Date(`${value}Z`).toISOString();

export const fmtTime = (/** @type {string | null | undefined} */ iso) =>
  iso ? `${new Date(iso).toISOString().replace("T", " ").slice(0, 19)} UTC` : "—";
export const fmtUnix = (/** @type {number | null | undefined} */ s) =>
  s ? fmtTime(new Date(s * 1000).toISOString()) : "—";
export const fmtUsd = (/** @type {number | null | undefined} */ n) =>
  `$${Number(n ?? 0).toFixed(n && n < 0.01 ? 6 : 2)}`;
export const fmtNum = (/** @type {number | null | undefined} */ n) => Number(n ?? 0).toLocaleString("en-US");

/** @param {{ error: unknown }} props What a page caught: an `ApiError`, another `Error`, or none. */
export function ErrorNote({ error }) {
  if (!error) return null;
  const message = /** @type {{ message?: unknown }} */ (error).message;
  return html`<p class="error" role="alert">${String(message ?? error)}</p>`;
}

/** @param {{ text?: string }} props */
export function Status({ text }) {
  return html`<p class="notice" role="status">${text ?? ""}</p>`;
}

/**
 * A table whose cells are text (or Preact nodes), with a caption for screen readers.
 * @param {{ caption: string, columns: string[], rows: ComponentChildren[][], empty?: string }} props
 */
export function Table({ caption, columns, rows, empty = "Nothing to show." }) {
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label=${caption}>
    <table>
      <caption>${caption}</caption>
      <thead><tr>${columns.map((c) => html`<th scope="col">${c}</th>`)}</tr></thead>
      <tbody>
        ${rows.length === 0 ? html`<tr><td colspan=${columns.length}>${empty}</td></tr>` : rows.map((r) => html`<tr>${r.map((cell) => html`<td>${cell}</td>`)}</tr>`)}
      </tbody>
    </table>
  </div>`;
}

/**
 * @typedef {object} ChartProps
 * @property {string} title
 * @property {"bar" | "line"} [type]
 * @property {unknown[]} labels
 * @property {{ label: string, data: number[], borderColor?: string, backgroundColor?: string }[]} datasets
 */

/**
 * A Chart.js chart (the UMD build the shell loads) on a canvas, with its data as a table beside it for screen readers.
 * @extends {Component<ChartProps, {}>}
 */
export class ChartView extends Component {
  /** @type {HTMLCanvasElement | null | undefined} */
  canvas;
  /** @type {import("chart.js").Chart | undefined} */
  chart;
  componentDidMount() {
    this.draw();
  }
  componentDidUpdate() {
    this.draw();
  }
  componentWillUnmount() {
    this.chart?.destroy();
  }
  draw() {
    this.chart?.destroy();
    if (!this.canvas || !window.Chart) return;
    const { type = "bar", labels, datasets } = this.props;
    this.chart = new window.Chart(this.canvas, {
      type,
      data: { labels, datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        plugins: { legend: { display: datasets.length > 1 } },
        scales: { y: { beginAtZero: true } },
      },
    });
  }
  /** @param {ChartProps} props */
  render({ title }) {
    return html`<figure class="chart">
      <figcaption>${title}</figcaption>
      <div class="chart-box"><canvas role="img" aria-label=${title} ref=${(/** @type {HTMLCanvasElement | null} */ c) => (this.canvas = c)}></canvas></div>
    </figure>`;
  }
}

/**
 * @typedef {object} ConfirmProps
 * @property {string} title
 * @property {string} text
 * @property {string} confirmLabel
 * @property {() => void} onConfirm
 * @property {() => void} onCancel
 */

/**
 * A modal confirmation (`<dialog>`): `onConfirm` runs only if the user confirms.
 * @extends {Component<ConfirmProps, {}>}
 */
export class Confirm extends Component {
  /** @type {HTMLDialogElement | null | undefined} */
  dialog;
  componentDidMount() {
    this.dialog?.showModal();
  }
  /** @param {ConfirmProps} props */
  render({ title, text, confirmLabel, onConfirm, onCancel }) {
    return html`<dialog ref=${(/** @type {HTMLDialogElement | null} */ d) => (this.dialog = d)} aria-labelledby="confirm-title" onCancel=${onCancel}>
      <h2 id="confirm-title">${title}</h2>
      <p>${text}</p>
      <div class="row">
        <button type="button" class="danger" onClick=${onConfirm}>${confirmLabel}</button>
        <button type="button" onClick=${onCancel}>Cancel</button>
      </div>
    </dialog>`;
  }
}

/**
 * Copies text to the clipboard (the page is a secure context on https and on localhost).
 * @param {string} text
 */
export async function copy(text) {
  await navigator.clipboard.writeText(text);
}
