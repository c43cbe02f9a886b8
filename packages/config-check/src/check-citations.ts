/**
 * What comments and documents cite exists. Three kinds are checkable:
 * - a repository path (`docs/testing.md`, `packages/core/src/errors.ts`,
 *   `deploy/k8s/`, …): the file or folder exists, from the repository root,
 *   the citing file's package or the citing file's folder;
 * - a heading of a document, cited as the document's name (`README` for the
 *   repository's), a comma and the heading in double quotes: that document
 *   has that heading, or a list item that opens with it in bold (the
 *   documents' sections within a page: `- **Traces** …`);
 * - a setting in backticks (`SPICEDB_ENDPOINT`, `BENCH_ONLY=gateway`): a
 *   configuration schema has it, the code or a deployment file uses that
 *   name, or it is git's (`GIT_…`), OpenTelemetry's (`OTEL_…`, read by its
 *   SDK and exporters) or Node's.
 * Comments are read from TypeScript sources (never their strings, which test
 * fixtures fill with wrong paths on purpose); documents whole.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";

/** Where citations are looked for, relative to the repository root. */
const ROOTS = ["README.md", "BENCHMARKS.md", "docs", "packages", "test", "spicedb", "deploy"];
/** Fixtures of the checks themselves hold wrong citations on purpose. */
const SKIPPED = /(^|\/)(node_modules|fixtures|generated)(\/|$)|(^|\/)\./;
/** The top folders of the repository a path is cited from. */
const PATH =
  /(?<![\w./@-])((?:docs|packages|spicedb|deploy|test)(?:\/[\w@-]+(?:\.[\w@-]+)*)+\/?)(?![\w*{$<])/g;
/** A document's name, a comma, a heading in double quotes. */
const HEADING = /(?<![\w./-])(README|[\w./-]+\.md)(?:'s)?,\s*"([^"\n]+)"/g;
/** An environment variable's name in backticks, alone or with a value. */
const SETTING = /`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g;
/** Variables of the platform, not of this project. */
const EXTERNAL_SETTINGS = new Set([
  "NODE_ENV",
  "NODE_OPTIONS",
  "NODE_EXTRA_CA_CERTS",
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
]);

export interface Citation {
  kind: "path" | "heading" | "setting";
  /** The path, `file#heading`, or the variable. */
  target: string;
  line: number;
}

/**
 * The comments of a TypeScript source, each with the line it starts on: a
 * small scanner that steps over strings, template literals and regular
 * expressions, so a `//` or a path inside them is not taken for a comment.
 */
export function commentsOf(source: string): { text: string; line: number }[] {
  const comments: { text: string; line: number }[] = [];
  let line = 1;
  let i = 0;
  /** The last significant character before `i`, to tell a regular expression from a division. */
  let previous = "";
  const advance = (to: number) => {
    for (; i < to && i < source.length; i++) if (source[i] === "\n") line++;
  };
  while (i < source.length) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === "/" && next === "/") {
      const end = source.indexOf("\n", i);
      const stop = end < 0 ? source.length : end;
      comments.push({ text: source.slice(i, stop), line });
      advance(stop);
    } else if (c === "/" && next === "*") {
      const end = source.indexOf("*/", i + 2);
      const stop = end < 0 ? source.length : end + 2;
      comments.push({ text: source.slice(i, stop), line });
      advance(stop);
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < source.length && source[j] !== c) j += source[j] === "\\" ? 2 : 1;
      advance(j + 1);
      previous = c;
    } else if (c === "/" && (previous === "" || /[(,=:[!&|?{};+\-*%<>~^]/.test(previous))) {
      let j = i + 1;
      let inClass = false;
      while (j < source.length && source[j] !== "\n" && (inClass || source[j] !== "/")) {
        if (source[j] === "\\") j++;
        else if (source[j] === "[") inClass = true;
        else if (source[j] === "]") inClass = false;
        j++;
      }
      advance(j + 1);
      previous = "/";
    } else {
      if (!/\s/.test(c)) previous = c;
      advance(i + 1);
    }
  }
  return comments;
}

/** What a piece of text cites, with line numbers counted from `firstLine`. */
export function citationsIn(text: string, firstLine = 1): Citation[] {
  const found: Citation[] = [];
  const lineAt = (index: number) => firstLine + text.slice(0, index).split("\n").length - 1;
  for (const m of text.matchAll(PATH)) found.push({ kind: "path", target: m[1]!, line: lineAt(m.index) });
  for (const m of text.matchAll(HEADING)) {
    const file = m[1] === "README" ? "README.md" : m[1]!;
    found.push({ kind: "heading", target: `${file}#${m[2]}`, line: lineAt(m.index) });
  }
  for (const m of text.matchAll(SETTING))
    found.push({ kind: "setting", target: m[1]!, line: lineAt(m.index) });
  return found;
}

/** The citations of a file: its comments if TypeScript, else all of it. */
export function citationsOfFile(path: string, text: string): Citation[] {
  if (!path.endsWith(".ts")) return citationsIn(text);
  return commentsOf(text).flatMap((c) => citationsIn(c.text, c.line));
}

/** Headings of a markdown text, outside code blocks, without their `#`s, and the bold labels that open list items. */
export function headingsOf(markdown: string): Set<string> {
  const headings = new Set<string>();
  let inCode = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) inCode = !inCode;
    const heading = !inCode && (/^#{1,6} (.*)$/.exec(line) ?? /^\s*[-*] \*\*([^*]+)\*\*/.exec(line));
    if (heading) headings.add(normalize(heading[1]!));
  }
  return headings;
}

const normalize = (heading: string) => heading.replace(/[`*_]/g, "").trim().toLowerCase();

async function filesUnder(root: string, path: string): Promise<string[]> {
  if (SKIPPED.test(path)) return [];
  const info = await stat(resolve(root, path)).catch(() => undefined);
  if (!info) return [];
  if (info.isFile()) return /\.(ts|md)$/.test(path) ? [path] : [];
  const found: string[] = [];
  for (const entry of await readdir(resolve(root, path), { withFileTypes: true }))
    found.push(...(await filesUnder(root, join(path, entry.name))));
  return found;
}

async function deployFiles(root: string, path: string): Promise<string[]> {
  const info = await stat(resolve(root, path)).catch(() => undefined);
  if (!info) return [];
  if (info.isFile()) return [path];
  const found: string[] = [];
  for (const entry of await readdir(resolve(root, path), { withFileTypes: true }))
    found.push(...(await deployFiles(root, join(path, entry.name))));
  return found;
}

/** Upper-case names the code uses (outside comments): constants, and variables read from the environment. */
function namesInCode(source: string): string[] {
  let code = source;
  for (const comment of commentsOf(source)) code = code.replace(comment.text, "");
  return [...code.matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g)].map((m) => m[0]);
}

/**
 * Every citation in the repository's comments and documents of a file, a
 * heading or a setting that does not exist, as `file:line: cites … (why)`.
 * `settings` are the variables the configuration schemas read.
 */
export async function missingCitations(root: string, settings: Set<string>): Promise<string[]> {
  const files = (await Promise.all(ROOTS.map((p) => filesUnder(root, p)))).flat().sort();
  const texts = new Map<string, string>();
  const read = async (path: string) => {
    if (!texts.has(path)) texts.set(path, await readFile(resolve(root, path), "utf8"));
    return texts.get(path)!;
  };
  const known = new Set([...settings, ...EXTERNAL_SETTINGS]);
  for (const file of files)
    if (file.endsWith(".ts")) for (const name of namesInCode(await read(file))) known.add(name);
  // What compose and the manifests pass to the processes (secrets, passwords) is named there.
  for (const file of await deployFiles(root, "deploy"))
    for (const m of (await readFile(resolve(root, file), "utf8")).matchAll(
      /\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g,
    ))
      known.add(m[0]);
  const exists = (path: string) =>
    stat(resolve(root, path)).then(
      () => true,
      () => false,
    );

  const problems: string[] = [];
  for (const file of files) {
    const pkg = /^packages\/[^/]+\//.exec(file)?.[0] ?? "";
    for (const { kind, target, line } of citationsOfFile(file, await read(file))) {
      const at = `${file}:${line}`;
      if (kind === "path") {
        const candidates = [target, join(pkg, target), relative(root, resolve(root, dirname(file), target))];
        if (!(await Promise.all(candidates.map(exists))).some(Boolean))
          problems.push(`${at}: cites ${target} (no such file or folder)`);
      } else if (kind === "heading") {
        const [document = "", heading = ""] = target.split("#", 2);
        const path = [document, join(pkg, document), join(dirname(file), document)];
        let found: string | undefined;
        for (const candidate of path)
          if (await exists(candidate)) {
            found = candidate;
            break;
          }
        if (!found) problems.push(`${at}: cites "${heading}" in ${document} (no such file)`);
        else if (!headingsOf(await read(found)).has(normalize(heading)))
          problems.push(`${at}: cites "${heading}" in ${found} (no such heading)`);
      } else if (!known.has(target) && !/^(GIT|OTEL)_/.test(target)) {
        problems.push(`${at}: cites ${target} (no configuration schema or code reads such a setting)`);
      }
    }
  }
  return problems;
}
