// What the console's scripts find on `window` beside their modules, and the browser events their forms handle.
import type { Chart } from "chart.js";

declare global {
  interface Window {
    /** Chart.js's UMD build, loaded by the shell before the modules. */
    Chart?: typeof Chart;
  }
}

/** An `input`/`change` event of a form field (`<input>`, `<select>`, `<textarea>`): its value is text. */
export type FieldEvent = Event & { currentTarget: { value: string } };
