// A key's limits: the windows the API takes, their form fields, and a limits object in words.
import { html } from "./ui.js";

/** @import { FieldEvent } from "../browser" */
/** @import { UnitLimits, UnitLimitsChange } from "../api-types" */

/** @typedef {Record<string, string>} LimitValues The form's values of limit fields, by field id; `""` is an empty field. */

const REQUEST_WINDOWS = /** @type {const} */ (["second", "minute", "hour", "day"]);
const TOKEN_WINDOWS = /** @type {const} */ (["minute", "hour", "day", "month"]);
const SPEND_WINDOWS = /** @type {const} */ (["day", "month"]);

/**
 * `{second: 5, tokens: {minute: 100}}` → `requests/second 5, tokens/minute 100`.
 * @param {UnitLimits | undefined} limits
 */
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

/**
 * A limit's form field: the unit (`null`: requests) and window it sets.
 * @typedef {{ id: string, label: string } & (
 *   | { unit: null, w: (typeof REQUEST_WINDOWS)[number] }
 *   | { unit: "tokens", w: (typeof TOKEN_WINDOWS)[number] }
 *   | { unit: "spend", w: (typeof SPEND_WINDOWS)[number] }
 * )} LimitField
 */

/** @returns {LimitField[]} */
const unitFields = (/** @type {string} */ prefix) => [
  ...REQUEST_WINDOWS.map((w) => ({ id: `${prefix}req-${w}`, label: `Requests per ${w}`, unit: null, w })),
  ...TOKEN_WINDOWS.map((w) => ({
    id: `${prefix}tok-${w}`,
    label: `Tokens per ${w}`,
    unit: /** @type {const} */ ("tokens"),
    w,
  })),
  ...SPEND_WINDOWS.map((w) => ({
    id: `${prefix}usd-${w}`,
    label: `Spend per ${w} (USD)`,
    unit: /** @type {const} */ ("spend"),
    w,
  })),
];

/**
 * A limits object as the form's values.
 * @param {UnitLimits | undefined} limits
 * @param {string} prefix
 */
export function unitValues(limits, prefix) {
  /** @type {LimitValues} */
  const values = {};
  for (const f of unitFields(prefix)) {
    const v =
      f.unit === "tokens" ? limits?.tokens?.[f.w] : f.unit === "spend" ? limits?.spend?.[f.w] : limits?.[f.w];
    values[f.id] = v === undefined ? "" : String(v);
  }
  return values;
}

/**
 * The form's values as a `limits` object; `removeEmpty` sends `null` for empty windows (a PATCH).
 * @param {LimitValues} values
 * @param {string} prefix
 * @param {boolean} removeEmpty
 */
export function unitLimits(values, prefix, removeEmpty) {
  /** @type {UnitLimitsChange} */
  const out = {};
  for (const f of unitFields(prefix)) {
    const raw = (values[f.id] ?? "").trim();
    if (raw === "" && !removeEmpty) continue;
    const v = raw === "" ? null : Number(raw);
    if (f.unit === "tokens") {
      out.tokens ??= {};
      out.tokens[f.w] = v;
    } else if (f.unit === "spend") {
      out.spend ??= {};
      out.spend[f.w] = v;
    } else out[f.w] = v;
  }
  return out;
}

/**
 * The fields of every window of every unit, `prefix` before their ids.
 * @param {{ legend: string, prefix: string, values: LimitValues, onInput: (id: string, value: string) => void }} props
 */
export function LimitFields({ legend, prefix, values, onInput }) {
  return html`<fieldset class="limits">
    <legend>${legend}</legend>
    ${unitFields(prefix).map(
      (f) => html`<label for=${f.id}>${f.label}
        <input id=${f.id} name=${f.id} type="number" min=${f.unit === "spend" ? "0" : "1"} step=${f.unit === "spend" ? "0.01" : "1"}
          inputmode="decimal" value=${values[f.id]} onInput=${(/** @type {FieldEvent} */ e) => onInput(f.id, e.currentTarget.value)} /></label>`,
    )}
  </fieldset>`;
}
