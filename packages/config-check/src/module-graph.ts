/**
 * The source modules of every package import each other without a cycle.
 * An edge is a relative import or re-export that is not type-only: those are
 * what run at load time, so a cycle through them means a module may see
 * another half-initialized. A module of one kind of work that needs another's
 * pieces takes them from a third module both import.
 */
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { graphCycles } from "./package-graph.ts";

/** The relative specifiers a module imports or re-exports at run time (type-only ones left out). */
export function runtimeImports(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.isTypeOnly) continue;
      const bindings = clause?.namedBindings;
      const onlyTypes =
        clause !== undefined &&
        clause.name === undefined &&
        bindings !== undefined &&
        ts.isNamedImports(bindings) &&
        bindings.elements.length > 0 &&
        bindings.elements.every((e) => e.isTypeOnly);
      if (onlyTypes) continue;
      if (ts.isStringLiteral(statement.moduleSpecifier)) found.push(statement.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(statement) && !statement.isTypeOnly && statement.moduleSpecifier) {
      const clause = statement.exportClause;
      if (clause && ts.isNamedExports(clause) && clause.elements.every((e) => e.isTypeOnly)) continue;
      if (ts.isStringLiteral(statement.moduleSpecifier)) found.push(statement.moduleSpecifier.text);
    }
  }
  return found.filter((s) => s.startsWith("./") || s.startsWith("../"));
}

/** One line per cycle, `a -> b -> a`, over modules named by path; empty when there is none. */
export function moduleCycles(imports: Map<string, string[]>): string[] {
  return graphCycles(imports).map((cycle) => `module graph: cycle ${cycle}`);
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await sourceFiles(path)));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) files.push(path);
  }
  return files;
}

/** The cycles among the modules of every `packages/<name>/src`, by path from the repository's root. */
export async function moduleGraphProblems(root: string): Promise<string[]> {
  const imports = new Map<string, string[]>();
  for (const pkg of (await readdir(resolve(root, "packages"))).sort()) {
    for (const file of await sourceFiles(resolve(root, "packages", pkg, "src"))) {
      const specifiers = runtimeImports(file, await readFile(file, "utf8"));
      imports.set(
        relative(root, file),
        specifiers.map((s) => relative(root, resolve(dirname(file), s))),
      );
    }
  }
  return moduleCycles(imports);
}
