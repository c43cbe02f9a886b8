import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { MODEL_ROUTES } from "@gw/gateway";
import { describe, expect, it } from "vitest";
import { serviceRoutes } from "../src/routes.ts";

/**
 * The service's layers, as its README describes them: Express only in the
 * HTTP layer (each feature's `routes/`, the shared `http/`) and the
 * composition roots that build the apps; the domain never imports from the
 * HTTP layer; a `Caller` only through `modelRoute`. A route's tests sit
 * beside it (`*.test.ts` in `routes/`): they may import the test kit and the
 * harness in `test/`, and no production file of the service or the gateway
 * imports a test file, the harness or the kit.
 */
const SRC = resolve(import.meta.dirname, "../src");
const REPO_ROOT = resolve(import.meta.dirname, "../../..");
/** The files that assemble processes and apps from the parts. */
const COMPOSITION_ROOTS = ["app.ts", "eval-worker-process.ts", "routes.ts"];

const isTest = (file: string) => file.endsWith(".test.ts");
const sourcesUnder = (dir: string) =>
  (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts"))
    .map((f) => f.split("\\").join("/"));
/** The service's production files, as paths from `src` (the tests beside the routes are not a layer). */
const files = sourcesUnder(SRC).filter((f) => !isTest(f));
const specifiersIn = (text: string) =>
  [...text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => m[1]!);
const importsOf = (file: string) => specifiersIn(readFileSync(join(SRC, file), "utf8"));
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
    expect(declared).toEqual([
      "POST /api/v1/llm/chat/completions",
      "POST /api/v1/llm/embeddings",
      "POST /api/v1/llm/responses",
      "POST /api/v1/llm/vector_stores/:id/search",
    ]);
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

/** The sources of the two processes that ship, as paths from the repository root. */
const SHIPPED = ["packages/service/src", "packages/gateway/src"];
const shippedFiles = SHIPPED.flatMap((dir) => sourcesUnder(join(REPO_ROOT, dir)).map((f) => `${dir}/${f}`));

/**
 * What a production file (a path from the repository root) may not import,
 * named, or undefined when it may: a test file, the harness in a package's
 * `test/` or the repository's, the test kit.
 */
function testCodeIn(file: string, specifier: string): string | undefined {
  if (/^@gw\/test-kit(\/|$)/.test(specifier)) return "the test kit";
  if (!specifier.startsWith(".")) return undefined;
  const target = relative(REPO_ROOT, resolve(REPO_ROOT, dirname(file), specifier))
    .split("\\")
    .join("/");
  if (isTest(target)) return "a test file";
  if (/^(packages\/[^/]+\/)?test\//.test(target)) return "the test harness";
  return undefined;
}

describe("tests beside the routes", () => {
  it("are found in src, beside the routes they test", () => {
    expect(shippedFiles).toContain("packages/service/src/conversations/routes/conversations.test.ts");
    expect(shippedFiles).toContain("packages/gateway/src/routes/authorization/authorization.test.ts");
  });

  it("tell test code from production code by what an import reaches", () => {
    const file = "packages/service/src/conversations/routes/get-conversation.ts";
    expect(testCodeIn(file, "./conversations.test.ts")).toBe("a test file");
    expect(testCodeIn(file, "../../../test/stack.ts")).toBe("the test harness");
    expect(testCodeIn(file, "../../../../../test/summary-reporter.ts")).toBe("the test harness");
    expect(testCodeIn(file, "@gw/test-kit")).toBe("the test kit");
    expect(testCodeIn(file, "@gw/test-kit/llm-upstream")).toBe("the test kit");
    expect(testCodeIn(file, "../store.ts")).toBeUndefined();
    expect(testCodeIn(file, "@gw/core/http")).toBeUndefined();
  });

  it("are imported by no production file of the service or the gateway, nor are the harness and the kit", () => {
    const offenders = shippedFiles
      .filter((f) => !isTest(f))
      .flatMap((f) =>
        specifiersIn(readFileSync(join(REPO_ROOT, f), "utf8")).flatMap((s) => {
          const why = testCodeIn(f, s);
          return why ? [`${f} → ${s} (${why})`] : [];
        }),
      );
    expect(offenders).toEqual([]);
  });
});
