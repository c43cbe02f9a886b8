/**
 * What `pnpm bench` measured, printed as it comes and written to
 * `BENCHMARKS.md` at the end.
 */
import { writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";

export class Report {
  private readonly lines: string[] = [];

  section(title: string, text?: string): void {
    console.log(`\n${title}`);
    this.lines.push("", `## ${title}`, "");
    if (text) {
      console.log(`  ${text}`);
      this.lines.push(text, "");
    }
  }

  table(headers: string[], rows: (string | number)[][]): void {
    const cells = rows.map((r) => r.map(String));
    const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
    for (const r of [headers, ...cells]) console.log(`  ${r.map((c, i) => c.padEnd(widths[i]!)).join("  ")}`);
    this.lines.push(`| ${headers.join(" | ")} |`, `| ${headers.map(() => "---").join(" | ")} |`);
    for (const r of cells) this.lines.push(`| ${r.join(" | ")} |`);
    this.lines.push("");
  }

  line(text: string): void {
    console.log(`  ${text}`);
    this.lines.push(text, "");
  }

  /** Rates side by side, each as a ratio of the first. */
  rates(title: string, rows: [string, number][]): void {
    const base = rows[0]![1];
    this.section(title);
    this.table(
      ["", "ops/s", "ratio"],
      rows.map(([name, rate]) => [name, rate.toFixed(0), `×${(rate / base).toFixed(2)}`]),
    );
  }

  async write(path: string, startedAt: Date, load: [number, number, number]): Promise<void> {
    const cpu = cpus();
    const header = [
      "# Benchmarks",
      "",
      "Written by `pnpm bench` (`node test/bench/run.ts`) from the code as committed: every comparison is",
      "measured side by side in one run, alternating, on the machine below. Only ratios are meant to",
      "carry over to other machines; nothing here is asserted by the tests.",
      "",
      `- Machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? "CPU"}, Node ${process.version}, ${process.platform}/${process.arch}`,
      `- Run: ${startedAt.toISOString()}, ${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)} s; load average before ${load.map((l) => l.toFixed(2)).join(", ")}, after ${loadavg()
        .map((l) => l.toFixed(2))
        .join(", ")}`,
    ];
    await writeFile(path, `${[...header, ...this.lines].join("\n").trimEnd()}\n`);
  }
}
