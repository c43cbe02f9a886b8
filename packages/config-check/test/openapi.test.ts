import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { JsonSchema } from "@gw/core/openapi";
import { describe, expect, it } from "vitest";
import {
  committedOpenApiProblems,
  OPENAPI_FILE,
  openApiDocument,
  openApiProblems,
  renderOpenApiDocument,
} from "../src/openapi.ts";

const document = openApiDocument() as {
  paths: Record<string, Record<string, Record<string, unknown>>>;
} & JsonSchema;

/** A schema of the document, with component references followed. */
function operation(method: string, path: string) {
  const found = document.paths[path]?.[method];
  if (!found) throw new Error(`${method} ${path} is not in the document`);
  return found as {
    requestBody?: { content: Record<string, { schema: JsonSchema }> };
    responses: Record<string, { content?: Record<string, { schema: JsonSchema }>; $ref?: string }>;
    parameters?: { name: string; in: string; required: boolean; schema?: JsonSchema; $ref?: string }[];
    security?: unknown[];
  };
}
/** A schema, or the named schema it refers to. */
const resolved = (schema: JsonSchema | undefined) => {
  const ref = schema?.$ref as string | undefined;
  if (!ref?.startsWith("#/components/schemas/")) return schema;
  return (document.components as { schemas: Record<string, JsonSchema> }).schemas[ref.split("/").at(-1)!];
};
const json = (response: { content?: Record<string, { schema: JsonSchema }> } | undefined) =>
  resolved(response?.content?.["application/json"]?.schema);

/** A small valid document to break one way at a time. */
const minimal = () => ({
  openapi: "3.1.0",
  info: { title: "t", version: "1" },
  paths: {
    "/a/{id}": {
      get: {
        operationId: "getA",
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
  } as Record<string, Record<string, Record<string, unknown>>>,
});

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1, with valid JSON Schemas and unique operation ids", async () => {
    expect(await openApiProblems(document)).toEqual([]);
  });

  it("is committed as `pnpm openapi` writes it now", async () => {
    expect(await committedOpenApiProblems()).toEqual([]);
  });

  it("says it is generated", () => {
    expect(document["x-generated"]).toMatch(/pnpm openapi/);
  });

  it.each([
    [
      "a response without a description",
      (d: ReturnType<typeof minimal>) => {
        d.paths["/a/{id}"]!.get!.responses = { "200": {} };
      },
      /must have required property 'description'/,
    ],
    [
      "a reference to nothing",
      (d: ReturnType<typeof minimal>) => {
        d.paths["/a/{id}"]!.get!.responses = { "200": { $ref: "#/components/responses/nope" } };
      },
      /Missing \$ref pointer/,
    ],
    [
      "a path parameter that is not required",
      (d: ReturnType<typeof minimal>) => {
        d.paths["/a/{id}"]!.get!.parameters = [{ name: "id", in: "path", schema: { type: "string" } }];
      },
      /must have required property 'required'/,
    ],
    [
      "a schema that is not JSON Schema",
      (d: ReturnType<typeof minimal>) => {
        d.paths["/a/{id}"]!.get!.responses = {
          "200": { description: "ok", content: { "application/json": { schema: { type: "text" } } } },
        };
      },
      /\/paths\/\/a\/\{id\}\/get\/responses\/200\/content\/application\/json\/schema is not a valid JSON Schema/,
    ],
    [
      "an operation id used twice",
      (d: ReturnType<typeof minimal>) => {
        d.paths["/b"] = { get: { operationId: "getA", responses: { "204": { description: "none" } } } };
      },
      /GET \/b repeats operationId getA/,
    ],
  ])("flags %s", async (_what, breakIt, problem) => {
    expect(await openApiProblems(minimal())).toEqual([]);
    const broken = minimal();
    breakIt(broken);
    const problems = await openApiProblems(broken);
    expect(problems.join("\n")).toMatch(problem);
  });

  it("flags a committed document that is missing, stale or not JSON", async () => {
    const root = await mkdtemp(join(tmpdir(), "openapi-check-"));
    try {
      expect(await committedOpenApiProblems(root)).toEqual([`${OPENAPI_FILE}: missing; run pnpm openapi`]);
      const file = join(root, OPENAPI_FILE);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(
        file,
        renderOpenApiDocument().replace('"summary": "This document"', '"summary": "Old"'),
      );
      expect(await committedOpenApiProblems(root)).toEqual([
        `${OPENAPI_FILE}: out of date; run pnpm openapi`,
      ]);
      await writeFile(file, "{");
      expect((await committedOpenApiProblems(root)).at(-1)).toMatch(/not JSON/);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("the contract's fixed shapes, as the document gives them", () => {
  it("push: GitHubPushRequest in, GitHubPushResult out, 422 HTTPValidationError", () => {
    const push = operation("post", "/api/v1/sandbox/sessions/{session_id}/github/push");
    expect(push.requestBody?.content["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/GitHubPushRequest",
    });
    expect(json(push.requestBody)).toEqual({
      type: "object",
      properties: {
        assignment_generation: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        branch: { type: "string", minLength: 1, maxLength: 255 },
        checkout_path: { type: "string", maxLength: 512, default: "" },
        force: { type: "boolean", default: false },
      },
      required: ["assignment_generation", "branch"],
      additionalProperties: false,
    });
    const str = { type: "string" };
    const int = { type: "integer" };
    expect(push.responses[200]?.content?.["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/GitHubPushResult",
    });
    expect(json(push.responses[200])).toEqual({
      type: "object",
      properties: {
        session_id: str,
        assignment_generation: int,
        repository_id: int,
        owner: str,
        repository: str,
        branch: str,
        remote_head_sha: str,
        no_changes: { type: "boolean" },
      },
      required: [
        "session_id",
        "assignment_generation",
        "repository_id",
        "owner",
        "repository",
        "branch",
        "remote_head_sha",
        "no_changes",
      ],
      additionalProperties: false,
    });
    expect(push.responses[422]).toEqual({ $ref: "#/components/responses/validation_failed" });
    expect(push.parameters).toContainEqual({ $ref: "#/components/parameters/OnBehalfOf" });
    expect(push.parameters).toContainEqual({
      name: "session_id",
      in: "path",
      required: true,
      schema: { type: "string" },
    });
  });

  it("eval schedule deletion, token exchange and check answer exactly their objects", () => {
    const deleted = operation("delete", "/api/v1/llm/evals/schedules/{schedule_id}");
    expect(json(deleted.responses[200])).toEqual({
      type: "object",
      properties: {
        id: { type: "string" },
        object: { type: "string", const: "eval.schedule.deleted" },
        deleted: { type: "boolean", const: true },
      },
      required: ["id", "object", "deleted"],
      additionalProperties: false,
    });
    const exchange = operation("post", "/api/v1/authentication/api-keys/exchange-token");
    expect(json(exchange.responses[200])).toMatchObject({
      properties: { token: { type: "string" } },
      required: ["token"],
      additionalProperties: false,
    });
    const body = exchange.requestBody?.content["application/json"]?.schema as {
      properties: Record<string, JsonSchema>;
      required: string[];
    };
    expect(body.required).toEqual(["audience", "externalUserId"]);
    expect(body.properties.expiresIn).toMatchObject({ type: "integer", minimum: 300, maximum: 2_592_000 });
    const check = operation("get", "/api/v1/authorization/llm/check");
    expect(json(check.responses[200])).toEqual({
      type: "object",
      properties: { allowed: { type: "boolean" } },
      required: ["allowed"],
      additionalProperties: false,
    });
  });

  it("grant and revoke answer 204 with no body; 403, 422 and 429 are the catalogue's", () => {
    for (const path of ["/api/v1/authorization/llm/grant", "/api/v1/authorization/llm/revoke"]) {
      const change = operation("post", path);
      expect(change.responses[204]).toEqual({ description: "Done; no body" });
      expect(change.responses[403]).toEqual({ $ref: "#/components/responses/forbidden" });
      expect(change.responses[422]).toEqual({ $ref: "#/components/responses/validation_failed" });
      expect(change.responses[429]).toEqual({ $ref: "#/components/responses/rate_limited" });
    }
  });

  it("the JWKS, the discovery document and this document need no credential; the rest a bearer one", () => {
    for (const path of [
      "/.well-known/jwks.json",
      "/.well-known/openid-configuration",
      "/api/v1/openapi.json",
    ]) {
      expect(operation("get", path).security).toEqual([]);
    }
    expect(operation("get", "/api/v1/usage").security).toBeUndefined();
    expect(document.security).toEqual([{ bearerAuth: [] }]);
  });
});

describe("what zod cannot see by itself, described all the same", () => {
  const createResponse = operation("post", "/api/v1/llm/responses").requestBody?.content["application/json"]
    ?.schema as { properties: Record<string, JsonSchema> };

  it("a field chosen by the value's kind is any of its choices, not anything", () => {
    const input = createResponse.properties.input as { anyOf: JsonSchema[] };
    expect(input.anyOf[0]).toEqual({ type: "string", minLength: 1 });
    expect(input.anyOf[1]).toMatchObject({ type: "array", minItems: 1, maxItems: 1_000 });
    expect(createResponse.properties.tool_choice).toMatchObject({
      anyOf: [{ type: "string", enum: ["none", "auto", "required"] }, expect.any(Object)],
    });
  });

  it("an object told apart by its type is any of the types taken", () => {
    const items = (createResponse.properties.input as { anyOf: { items?: { anyOf: JsonSchema[] } }[] })
      .anyOf[1]?.items?.anyOf;
    expect(
      items?.map((item) => (item as { properties: { type: { const: string } } }).properties.type.const),
    ).toEqual([
      "message",
      "function_call",
      "function_call_output",
      "mcp_list_tools",
      "mcp_call",
      "mcp_approval_request",
      "mcp_approval_response",
      "item_reference",
    ]);
  });

  it("a default zod leaves out (behind a preprocess) is kept; a body can be refused by the JSON parser, in the surface's shape", () => {
    const items = operation("get", "/api/v1/llm/conversations/{id}/items");
    expect(items.parameters?.find((p) => p.name === "limit")?.schema).toEqual({
      type: "integer",
      minimum: 1,
      maximum: 100,
      default: 20,
    });
    const create = operation("post", "/api/v1/llm/conversations");
    for (const [status, code] of [
      [400, "bad_request"],
      [413, "payload_too_large"],
      [415, "unsupported_media_type"],
    ] as const) {
      // /api/v1/llm answers OpenAI's error shape; the admin API the catalogue's own.
      expect(create.responses[status]).toEqual({ $ref: `#/components/responses/openai_${code}` });
      expect(operation("post", "/api/v1/admin/api-keys").responses[status]).toEqual({
        $ref: `#/components/responses/${code}`,
      });
    }
    // A 422 there has the contract's `detail` and OpenAI's `error` beside it.
    expect(create.responses[422]).toEqual({ $ref: "#/components/responses/openai_validation_failed" });
    expect(operation("post", "/api/v1/admin/api-keys").responses[422]).toEqual({
      $ref: "#/components/responses/validation_failed",
    });
    // A model call's 429: the key's quota, or the provider's.
    expect(operation("post", "/api/v1/llm/responses").responses[429]).toEqual({
      $ref: "#/components/responses/openai_rate_limited_or_provider_rate_limited",
    });
    expect(create.responses[429]).toEqual({ $ref: "#/components/responses/rate_limited" });
  });

  it("a field the service refuses admits no value; a number checked by hand keeps its bounds", () => {
    expect(createResponse.properties.prompt).toEqual({
      description: "prompt (stored prompt templates) is not supported by this service",
      not: {},
    });
    expect(createResponse.properties.temperature).toEqual({ type: "number", minimum: 0, maximum: 2 });
  });
});
