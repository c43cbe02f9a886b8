// A key's limits: the windows the API takes, their form fields, and a limits object in words.
import { html } from "./ui.js";

const REQUEST_WINDOWS = ["second", "minute", "hour", "day"];
const TOKEN_WINDOWS = ["minute", "hour", "day", "month"];
const SPEND_WINDOWS = ["day", "month"];

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

const unitFields = (prefix) => [
  ...REQUEST_WINDOWS.map((w) => ({ id: `${prefix}req-${w}`, label: `Requests per ${w}`, unit: null, w })),
  ...TOKEN_WINDOWS.map((w) => ({ id: `${prefix}tok-${w}`, label: `Tokens per ${w}`, unit: "tokens", w })),
  ...SPEND_WINDOWS.map((w) => ({ id: `${prefix}usd-${w}`, label: `Spend per ${w} (USD)`, unit: "spend", w })),
];

export function unitValues(limits, prefix) {
  const values = {};
  for (const f of unitFields(prefix)) {
    const v = f.unit ? limits?.[f.unit]?.[f.w] : limits?.[f.w];
    values[f.id] = v === undefined ? "" : String(v);
  }
  return values;
}

/** The form's values as a `limits` object; `removeEmpty` sends `null` for empty windows (a PATCH). */
export function unitLimits(values, prefix, removeEmpty) {
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

export function LimitFields({ legend, prefix, values, onInput }) {
  return html`<fieldset class="limits">
    <legend>${legend}</legend>
    ${unitFields(prefix).map(
      (f) => html`<label for=${f.id}>${f.label}
        <input id=${f.id} name=${f.id} type="number" min=${f.unit === "spend" ? "0" : "1"} step=${f.unit === "spend" ? "0.01" : "1"}
          inputmode="decimal" value=${values[f.id]} onInput=${(e) => onInput(f.id, e.currentTarget.value)} /></label>`,
    )}
  </fieldset>`;
}
