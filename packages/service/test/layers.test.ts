import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { MODEL_ROUTES } from "@gw/gateway";
import { describe, expect, it } from "vitest";
import { serviceRoutes } from "../src/routes.ts";

/**
 * The service's layers, as its README describes them: Express only in the
 * HTTP layer (each feature's `routes/`, the shared `http/`) and the
 * composition roots that build the apps; the domain never imports from the
 * HTTP layer; a `Caller` only through `modelRoute`.
 */
const SRC = resolve(import.meta.dirname, "../src");
const REPO_ROOT = resolve(import.meta.dirname, "../../..");
/** The files that assemble processes and apps from the parts. */
const COMPOSITION_ROOTS = ["app.ts", "eval-worker-process.ts", "routes.ts"];

const files = (readdirSync(SRC, { recursive: true }) as string[])
  .filter((f) => f.endsWith(".ts"))
  .map((f) => f.split("\\").join("/"));
const importsOf = (file: string) =>
  [...readFileSync(join(SRC, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => m[1]!);
/** An import of a file of `src`, as a path from `src`; a package's name as it is. */
const target = (file: string, specifier: string) =>
  specifier.startsWith(".") ? relative(SRC, resolve(SRC, dirname(file), specifier)) : specifier;
const inHttpLayer = (file: string) => file.startsWith("http/") || /(^|\/)routes\//.test(file);

describe("the service's layers", () => {
  it("has files to look at (the walk finds the routes and the domain)", () => {
    expect(files).toContain("conversations/routes/get-conversation.ts");
    expect(files).toContain("calls/model-call.ts");
  });

  it("import Express only in the HTTP layer and the composition roots", () => {
    const offenders = files.filter(
      (f) => !inHttpLayer(f) && !COMPOSITION_ROOTS.includes(f) && importsOf(f).includes("express"),
    );
    expect(offenders).toEqual([]);
  });

  it("never import the HTTP layer (a feature's routes/, http/) from the domain", () => {
    const offenders = files.flatMap((f) =>
      inHttpLayer(f) || COMPOSITION_ROOTS.includes(f)
        ? []
        : importsOf(f)
            .map((s) => target(f, s))
            .filter(inHttpLayer)
            .map((t) => `${f} → ${t}`),
    );
    expect(offenders).toEqual([]);
  });

  it("give a route a Caller only through modelRoute (so only routes declared callsModel call a model)", () => {
    const users = files.filter((f) =>
      importsOf(f).some(
        (s) =>
          target(f, s) === "http/model-call.ts" && /\bcallerOf\b/.test(readFileSync(join(SRC, f), "utf8")),
      ),
    );
    expect(users).toEqual(["http/model-route.ts"]);
  });
});

describe("the model routes", () => {
  const declared = serviceRoutes
    .filter((r) => r.callsModel)
    .map((r) => `${r.method} ${r.path}`)
    .sort();

  it("are what the gateway reads from the OpenAPI document", () => {
    expect(declared).toEqual(["POST /api/v1/llm/chat/completions", "POST /api/v1/llm/responses"]);
    expect(MODEL_ROUTES.map((r) => `${r.method} ${r.path}`).sort()).toEqual(declared);
  });

  it("are the ones docs/api/rate-limits.md names as the endpoints that call a model", () => {
    const doc = readFileSync(join(REPO_ROOT, "docs/api/rate-limits.md"), "utf8").replace(/\s+/g, " ");
    const sentence = /Every service endpoint that calls a model \(([^)]*)\)/.exec(doc)?.[1];
    expect(sentence, "docs/api/rate-limits.md lists the model endpoints").toBeDefined();
    const named = [...sentence!.matchAll(/`(GET|POST|PUT|DELETE) ([^`]+)`/g)]
      .map((m) => `${m[1]} ${m[2]}`)
      .sort();
    expect(named).toEqual(declared);
  });
});
