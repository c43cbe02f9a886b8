// What the console's scripts find on `window` beside their modules.
import type { Chart } from "chart.js";

declare global {
  interface Window {
    /** Chart.js's UMD build, loaded by the shell before the modules. */
    Chart?: typeof Chart;
  }
}
