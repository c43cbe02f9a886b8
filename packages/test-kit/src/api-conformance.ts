/**
 * Every answer a test gets from a gateway, checked against the OpenAPI
 * document the gateway publishes (`packages/gateway/src/generated/openapi.json`,
 * written by `pnpm openapi` from the routes' declarations): the status must be
 * one the operation declares, a JSON body must be of the schema declared for
 * that status, and a body of another media type must be one the status
 * declares. The response shapes are written once in the declarations and
 * the handlers' TypeScript types apart from them; this is what keeps the two
 * from drifting.
 *
 * `watchApi(url)` (the harnesses call it for every gateway they start) makes
 * the process's `fetch` check each answer from that origin before handing it
 * back, and reject with the problems when one does not conform, so the test
 * that made the request fails at that request. Client libraries that use the
 * global `fetch` (OpenAI's, the AI SDK) are checked the same way. Only a
 * declared operation's answers are checked (not the console's pages, health
 * or metrics); bodies that are not JSON (event streams, files) are read by
 * no one but the test.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";

type Json = Record<string, unknown>;

/** Where `pnpm openapi` writes the document, from the repository's root. */
const DOCUMENT_FILE = "packages/gateway/src/generated/openapi.json";

interface Operation {
  /** The document's path template, e.g. `/api/v1/llm/conversations/{id}`. */
  path: string;
  method: string;
  operationId: string;
  responses: Record<string, Json>;
  /** `service` for an operation the gateway forwards to the service. */
  upstream?: string;
}

export interface WatchOptions {
  /**
   * Check only the gateway's own operations, not those it forwards: for a
   * gateway in front of a stand-in service, whose answers are the test's own.
   */
  gatewayOnly?: boolean;
}

interface Matcher {
  pattern: RegExp;
  /** Literal segments first: `/files/search` before `/files/{id}`. */
  literals: number;
  operation: Operation;
}

let state:
  | {
      document: Json;
      matchers: Map<string, Matcher[]>;
      ajv: Ajv2020;
      compiled: Map<string, ValidateFunction>;
    }
  | undefined;

function load(document?: Json) {
  if (state && !document) return state;
  const doc = document ?? (JSON.parse(readFileSync(join(REPO_ROOT, DOCUMENT_FILE), "utf8")) as Json);
  const matchers = new Map<string, Matcher[]>();
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    const segments = path.split("/");
    const pattern = new RegExp(
      `^${segments.map((s) => (/^\{.+\}$/.test(s) ? "[^/]+" : s.replace(/[.*+?^$()|[\]\\]/g, "\\$&"))).join("/")}$`,
    );
    const literals = segments.filter((s) => !/^\{.+\}$/.test(s)).length;
    for (const [method, operation] of Object.entries(item)) {
      const list = matchers.get(method.toUpperCase()) ?? [];
      list.push({
        pattern,
        literals,
        operation: {
          path,
          method: method.toUpperCase(),
          operationId: operation.operationId as string,
          responses: operation.responses as Record<string, Json>,
          upstream: operation["x-gw-upstream"] as string | undefined,
        },
      });
      matchers.set(method.toUpperCase(), list);
    }
  }
  for (const list of matchers.values()) list.sort((a, b) => b.literals - a.literals);
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ ...doc, $id: "api" });
  const made = { document: doc, matchers, ajv, compiled: new Map<string, ValidateFunction>() };
  if (!document) state = made;
  return made;
}

/** The declared operation a request is answered by, if any. */
export function operationOf(method: string, pathname: string, document?: Json): Operation | undefined {
  return load(document)
    .matchers.get(method.toUpperCase())
    ?.find((m) => m.pattern.test(pathname))?.operation;
}

const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

/** A response object, through its `$ref` into `components.responses`. */
function resolveResponse(document: Json, response: Json): { response: Json; at: string } | undefined {
  const ref = response.$ref;
  if (typeof ref !== "string") return undefined;
  const name = ref.split("/").at(-1)!;
  const found = ((document.components as Json).responses as Record<string, Json>)[name];
  return found ? { response: found, at: `#/${pointer("components", "responses", name)}` } : undefined;
}

export interface Answer {
  method: string;
  /** The request's path (its query left out). */
  pathname: string;
  status: number;
  /** The `Content-Type` header, if any. */
  contentType: string | null;
  /** The body's text, read for JSON answers only. */
  body?: string;
}

/** `application/json` of `application/json; charset=utf-8`; `""` for none. */
const mediaTypeOf = (contentType: string | null) =>
  (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";

const isJson = (mediaType: string) => mediaType === "application/json" || mediaType.endsWith("+json");

/**
 * Why an answer does not conform to the document (`[]` when it does, or when
 * no declared operation serves the request). `document` defaults to the
 * committed one.
 */
export function conformanceProblems(answer: Answer, document?: Json, options: WatchOptions = {}): string[] {
  const loaded = load(document);
  const operation = operationOf(answer.method, answer.pathname, document);
  if (!operation || (options.gatewayOnly && operation.upstream === "service")) return [];
  const where = `${operation.method} ${operation.path} (${operation.operationId}) answered ${answer.status}`;
  const declared =
    operation.responses[String(answer.status)] ??
    (answer.status === 431 ? { $ref: "#/components/responses/request_header_fields_too_large" } : undefined);
  if (!declared) {
    return [`${where}, a status it does not declare (${Object.keys(operation.responses).join(", ")})`];
  }
  let response = declared;
  let at = `#/${pointer("paths", operation.path, operation.method.toLowerCase(), "responses", String(answer.status))}`;
  const resolved = resolveResponse(loaded.document, declared);
  if (resolved) ({ response, at } = resolved);
  const content = (response.content as Record<string, Json> | undefined) ?? {};
  const mediaType = mediaTypeOf(answer.contentType);
  if (!mediaType) {
    if (answer.body && Object.keys(content).length > 0) return [`${where} with a body of no Content-Type`];
    return [];
  }
  // A range (`*/*`, `image/*`: a file's own type) says nothing of the body's shape.
  const [kind] = mediaType.split("/");
  if (!content[mediaType] && (content["*/*"] || content[`${kind}/*`])) return [];
  if (!isJson(mediaType)) {
    return content[mediaType] || (Object.keys(content).length === 0 && answer.status === 204)
      ? []
      : [
          `${where} as ${mediaType}, which that status does not declare (${Object.keys(content).join(", ") || "no body"})`,
        ];
  }
  const schemaAt = content["application/json"] ? "application/json" : undefined;
  if (!schemaAt) {
    return [
      `${where} with a JSON body, which that status does not declare (${Object.keys(content).join(", ") || "no body"})`,
    ];
  }
  let value: unknown;
  try {
    value = JSON.parse(answer.body ?? "");
  } catch {
    return [`${where} with a body that is not JSON: ${JSON.stringify((answer.body ?? "").slice(0, 200))}`];
  }
  const ref = `api${at}/${pointer("content", schemaAt, "schema")}`;
  let validate = loaded.compiled.get(ref);
  if (!validate) {
    validate = loaded.ajv.compile({ $ref: ref });
    loaded.compiled.set(ref, validate);
  }
  if (validate(value)) return [];
  return (validate.errors ?? [])
    .slice(0, 10)
    .map(
      (e: ErrorObject) =>
        `${where}: body${e.instancePath} ${e.message ?? ""} ${JSON.stringify(e.params)} (schema ${e.schemaPath})`,
    );
}

/** A request whose answer did not conform to the published document. */
export class ApiConformanceError extends Error {
  override name = "ApiConformanceError";
}

/** The origins (with their path prefix) whose answers are checked, and how. */
const watched = new Map<string, { options: WatchOptions; count: number }>();
let unchecked: typeof fetch | undefined;

function watchedPath(url: URL): { pathname: string; options: WatchOptions } | undefined {
  for (const [base, { options }] of watched) {
    const b = new URL(base);
    if (b.origin !== url.origin) continue;
    const prefix = b.pathname.replace(/\/$/, "");
    if (url.pathname === prefix || url.pathname.startsWith(`${prefix}/`))
      return { pathname: url.pathname.slice(prefix.length) || "/", options };
  }
  return undefined;
}

async function checkingFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await unchecked!(input, init);
  const request = input instanceof Request ? input : undefined;
  const url = new URL(request ? request.url : String(input));
  const at = watchedPath(url);
  if (at === undefined) return response;
  const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
  if (method === "HEAD" || method === "OPTIONS") return response;
  const contentType = response.headers.get("content-type");
  const mediaType = mediaTypeOf(contentType);
  const body = isJson(mediaType) ? await response.clone().text() : undefined;
  const problems = conformanceProblems(
    { method, pathname: at.pathname, status: response.status, contentType, body },
    undefined,
    at.options,
  );
  if (problems.length > 0) {
    throw new ApiConformanceError(
      `The answer does not conform to the OpenAPI document (${DOCUMENT_FILE}; fix the route's declaration or its handler, then \`pnpm openapi\`):\n${problems.join("\n")}\nbody: ${(body ?? "").slice(0, 1000)}`,
    );
  }
  return response;
}

/**
 * Checks every answer this process's `fetch` gets from `baseUrl` (a
 * gateway's URL) until the returned function is called.
 */
export function watchApi(baseUrl: string, options: WatchOptions = {}): () => void {
  if (!unchecked) {
    unchecked = globalThis.fetch;
    globalThis.fetch = checkingFetch as typeof fetch;
  }
  watched.set(baseUrl, { options, count: (watched.get(baseUrl)?.count ?? 0) + 1 });
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const entry = watched.get(baseUrl);
    if (entry && entry.count > 1) entry.count -= 1;
    else watched.delete(baseUrl);
  };
}
