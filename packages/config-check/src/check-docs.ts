/**
 * The documentation's links resolve: every relative link in the README, in
 * `docs/` and in the packages' READMEs points to a file of the repository,
 * and a `#fragment` to a heading of that file (GitHub's anchors).
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";

/** Where documentation lives, relative to the repository root. */
const DOC_ROOTS = ["README.md", "BENCHMARKS.md", "docs", "packages"];

async function markdownFiles(root: string, path: string): Promise<string[]> {
  const full = resolve(root, path);
  const info = await stat(full).catch(() => undefined);
  if (!info) return [];
  if (info.isFile()) return path.endsWith(".md") ? [path] : [];
  const found: string[] = [];
  for (const entry of await readdir(full, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) found.push(...(await markdownFiles(root, child)));
    else if (entry.name.endsWith(".md")) found.push(child);
  }
  return found;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inCode = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) inCode = !inCode;
    const heading = !inCode && /^#{1,6} (.*)$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Relative links of a markdown text, outside code blocks and code spans. */
export function relativeLinks(markdown: string): string[] {
  const links: string[] = [];
  let inCode = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) inCode = !inCode;
    if (inCode) continue;
    const prose = line.replace(/`[^`]*`/g, "");
    for (const match of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = match[1]!;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(href)) links.push(href);
    }
  }
  return links;
}

/** Every broken link, as `file: link (why)`. */
export async function brokenDocLinks(root: string): Promise<string[]> {
  const files = (await Promise.all(DOC_ROOTS.map((p) => markdownFiles(root, p)))).flat();
  const texts = new Map<string, string>();
  const read = async (path: string) => {
    if (!texts.has(path)) texts.set(path, await readFile(resolve(root, path), "utf8"));
    return texts.get(path)!;
  };
  const problems: string[] = [];
  for (const file of files) {
    for (const href of relativeLinks(await read(file))) {
      const [target = "", fragment] = href.split("#", 2);
      const path = target === "" ? file : relative(root, resolve(root, dirname(file), decodeURI(target)));
      const info = await stat(resolve(root, path)).catch(() => undefined);
      if (!info || path.startsWith("..")) {
        problems.push(`${file}: ${href} (no such file)`);
        continue;
      }
      if (
        fragment &&
        info.isFile() &&
        path.endsWith(".md") &&
        !headingAnchors(await read(path)).has(fragment)
      ) {
        problems.push(`${file}: ${href} (no such heading in ${path})`);
      }
    }
  }
  return problems;
}
