import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";

/** The repository's root. */
export const ROOT = resolve(import.meta.dirname, "../../..");

/** The sources of every package (not their tests: `test/`, and the `*.test.ts` beside the routes). */
export async function sources(dir = resolve(ROOT, "packages")): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "test") continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await sources(path)));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) found.push(path);
  }
  return found;
}
