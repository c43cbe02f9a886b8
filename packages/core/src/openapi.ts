import { z } from "zod";
import { ERROR_CATALOGUE, type ErrorCode, isOpenAISurface } from "./errors.ts";

/** A JSON Schema (draft 2020-12, OpenAPI 3.1's dialect). */
export type JsonSchema = Record<string, unknown>;

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** What a response of an operation holds: a zod schema, a JSON Schema, or nothing (204). */
export interface ApiResponse {
  description: string;
  schema?: z.ZodType | JsonSchema;
  /** Default `application/json`. */
  contentType?: string;
  /** Other media types the same status may answer with (e.g. `text/event-stream` when asked to stream). */
  alternatives?: Record<string, z.ZodType | JsonSchema>;
  headers?: Record<string, { description: string; schema: JsonSchema }>;
  /** A name the API reference uses (`GitHubPushResult`): the schema goes to `components.schemas`. */
  name?: string;
}

/**
 * One endpoint as the OpenAPI document describes it. Request schemas are the
 * zod schemas the route validates with, so the document cannot drift from
 * what the route accepts.
 */
export interface ApiOperation {
  method: Method;
  /** Express template with its mount path, e.g. `/api/v1/llm/conversations/:id`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  description?: string;
  /** `none` for public endpoints (JWKS, the document itself). Default `bearer`. */
  auth?: "bearer" | "none";
  /** The key permission the route requires, named in the description. */
  permission?: string;
  deprecated?: boolean;
  /** Accepts `X-On-Behalf-Of`. Default: every bearer-authenticated operation. */
  onBehalfOf?: boolean;
  params?: z.ZodObject;
  query?: z.ZodObject;
  /** Request headers the operation reads besides `Authorization` and `X-On-Behalf-Of` (all optional). */
  headers?: ApiHeader[];
  body?: z.ZodType | JsonSchema;
  /**
   * The body's media type: `application/json` (the default, parsed before the
   * route runs), or `multipart/form-data` for a route that reads its body
   * itself as it arrives (a file upload), whose `body` then describes the form's fields.
   */
  bodyContentType?: "application/json" | "multipart/form-data";
  /** The body's name in the API reference (`GitHubPushRequest`), for `components.schemas`. */
  bodyName?: string;
  /** Success responses, by status. Error responses come from the catalogue (`errors`). */
  responses: Record<number, ApiResponse>;
  /** Catalogue errors this operation answers, besides the ones every authenticated operation can. */
  errors?: ErrorCode[];
  /** OpenAPI extensions of the operation (`x-gw-upstream`…), written as they are. */
  extensions?: Record<`x-${string}`, unknown>;
}

/** An optional request header an operation reads. */
export interface ApiHeader {
  name: string;
  description: string;
  schema: JsonSchema;
}

export interface ApiDocumentInfo {
  title: string;
  version: string;
  description: string;
}

/** Errors any authenticated operation may answer: bad credential, missing permission, rate limit, an outage. */
const AUTHENTICATED_ERRORS: ErrorCode[] = [
  "unauthorized",
  "forbidden",
  "rate_limited",
  "service_unavailable",
];

/** A JSON object whose properties are all required unless listed in `optional`, no others allowed. */
export function objectSchema(
  properties: Record<string, JsonSchema>,
  options: { optional?: string[]; description?: string; open?: boolean } = {},
): JsonSchema {
  return {
    type: "object",
    ...(options.description ? { description: options.description } : {}),
    properties,
    required: Object.keys(properties).filter((name) => !options.optional?.includes(name)),
    ...(options.open ? {} : { additionalProperties: false }),
  };
}

/** `{id, object, deleted: true}`: what a DELETE answers for the resources that follow OpenAI's shape. */
export const deletedSchema = (object: string): JsonSchema =>
  objectSchema({
    id: { type: "string" },
    object: { type: "string", const: object },
    deleted: { type: "boolean", const: true },
  });

/** A JSON Schema `type: string` with an optional description. */
export const stringSchema = (description?: string): JsonSchema => ({
  type: "string",
  ...(description ? { description } : {}),
});

/** JSON Schemas of zod schemas that zod cannot describe itself, by `documentedAs`. */
const DOCUMENTED = new WeakMap<object, () => JsonSchema>();

/**
 * Tells the document what `schema` accepts where zod cannot see it: a
 * transform that picks its schema by looking at the value, a custom check.
 * Lazy, so nothing is computed unless a document is made.
 */
export function documentedAs<T extends z.ZodType>(schema: T, json: () => JsonSchema): T {
  DOCUMENTED.set(schema, json);
  return schema;
}

/** A zod schema as the JSON Schema of what a client sends (`io: "input"`: defaults are optional). */
export function jsonSchemaOf(schema: z.ZodType | JsonSchema, io: "input" | "output" = "input"): JsonSchema {
  if (!(schema instanceof z.ZodType)) return schema;
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
    override: ({ zodSchema, jsonSchema }) => {
      const documented = DOCUMENTED.get(zodSchema);
      if (documented) {
        for (const key of Object.keys(jsonSchema)) delete (jsonSchema as JsonSchema)[key];
        Object.assign(jsonSchema, documented());
      }
      // zod leaves out the default of a schema whose input it cannot tell from its output (a preprocess).
      const def = zodSchema._zod.def as { type: string; defaultValue?: unknown };
      if (
        io === "input" &&
        def.type === "default" &&
        !("default" in jsonSchema) &&
        isJsonScalar(def.defaultValue)
      )
        (jsonSchema as JsonSchema).default = def.defaultValue;
    },
  }) as JsonSchema;
  return json;
}

const isJsonScalar = (value: unknown) => ["string", "number", "boolean"].includes(typeof value);

const openApiPath = (template: string) => template.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}");

function parameters(operation: ApiOperation): JsonSchema[] {
  const out: JsonSchema[] = [];
  const pathParams = jsonSchemaOf(operation.params ?? z.object({})) as {
    properties?: Record<string, JsonSchema>;
  };
  for (const [, name] of operation.path.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)) {
    out.push({
      name,
      in: "path",
      required: true,
      schema: pathParams.properties?.[name!] ?? { type: "string" },
    });
  }
  if (operation.query) {
    const query = jsonSchemaOf(operation.query) as {
      properties?: Record<string, JsonSchema>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      out.push({ name, in: "query", required: query.required?.includes(name) ?? false, schema });
    }
  }
  for (const header of operation.headers ?? []) out.push({ ...header, in: "header", required: false });
  if (acceptsOnBehalfOf(operation)) {
    out.push({ $ref: "#/components/parameters/OnBehalfOf" });
  }
  return out;
}

const acceptsOnBehalfOf = (operation: ApiOperation) =>
  (operation.onBehalfOf ?? operation.auth !== "none") && operation.auth !== "none";

function errorResponses(operation: ApiOperation): Record<string, JsonSchema> {
  const codes = new Set<ErrorCode>([
    ...(operation.auth === "none" ? [] : AUTHENTICATED_ERRORS),
    ...(operation.errors ?? []),
    // A request's parts, `X-On-Behalf-Of` among them.
    ...(operation.body ||
    operation.query ||
    operation.params ||
    operation.headers ||
    acceptsOnBehalfOf(operation)
      ? (["validation_failed"] as const)
      : []),
    // The router's answer to a path parameter of malformed percent-encoding (`%zz`).
    ...(operation.path.includes(":") ? (["bad_request"] as const) : []),
    // What the JSON body parser answers: unreadable or malformed JSON, too large, not JSON; a route
    // reading its own multipart body answers the rest itself (`errors`).
    ...(operation.body
      ? operation.bodyContentType === "multipart/form-data"
        ? (["unsupported_media_type"] as const)
        : (["bad_request", "payload_too_large", "unsupported_media_type"] as const)
      : []),
  ]);
  // On the OpenAI-compatible surface every error but the key's 429 has OpenAI's shape (a 422 beside the contract's `detail`).
  const openai = isOpenAISurface(operation.path);
  const out: Record<string, JsonSchema> = {};
  const byStatus = new Map<string, ErrorCode[]>();
  for (const code of [...codes].sort((a, b) => ERROR_CATALOGUE[a].status - ERROR_CATALOGUE[b].status)) {
    const status = String(ERROR_CATALOGUE[code].status);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    const shaped = openai && code !== "rate_limited";
    out[status] = { $ref: `#/components/responses/${shaped ? `openai_${code}` : code}` };
  }
  // Several codes of one status, of one shape (413: a JSON body too large, a file too large, a quota): named together.
  for (const [status, shared] of byStatus) {
    if (shared.length < 2 || shared.includes("rate_limited")) continue;
    out[status] = {
      description: `${status} ${ERROR_CATALOGUE[shared[0]!].title}: \`code\` ${shared.map((c) => `\`${c}\``).join(", ")}`,
      content: {
        "application/json": { schema: { $ref: `#/components/schemas/${openai ? "OpenAIError" : "Error"}` } },
      },
    };
  }
  // Two 429s: the key's quota (the contract's body) or the model provider's (OpenAI's).
  if (codes.has("rate_limited") && codes.has("provider_rate_limited")) {
    out["429"] = {
      $ref: `#/components/responses/${openai ? "openai_" : ""}rate_limited_or_provider_rate_limited`,
    };
  }
  return out;
}

/** Named schemas, for `components.schemas`: one name, one schema. */
class NamedSchemas {
  readonly schemas: Record<string, JsonSchema> = {};

  /** `schema` itself, or a reference to it under `name`. */
  use(schema: JsonSchema, name: string | undefined): JsonSchema {
    if (name === undefined) return schema;
    const known = this.schemas[name];
    if (known && JSON.stringify(known) !== JSON.stringify(schema))
      throw new Error(`Two different schemas are named ${name}`);
    this.schemas[name] = schema;
    return { $ref: `#/components/schemas/${name}` };
  }
}

function responseObject(response: ApiResponse, named: NamedSchemas): JsonSchema {
  const main = response.schema && named.use(jsonSchemaOf(response.schema, "output"), response.name);
  return {
    description: response.description,
    ...(response.headers ? { headers: response.headers } : {}),
    ...(main
      ? {
          content: {
            [response.contentType ?? "application/json"]: { schema: main },
            ...Object.fromEntries(
              Object.entries(response.alternatives ?? {}).map(([type, schema]) => [
                type,
                { schema: jsonSchemaOf(schema, "output") },
              ]),
            ),
          },
        }
      : {}),
  };
}

/**
 * An operation's own responses and the catalogue's error responses. Where
 * both name a status (the MCP proxy's JSON-RPC errors beside the catalogue's
 * 401), the status answers either body.
 */
function withErrorResponses(
  own: Record<string, JsonSchema>,
  errors: Record<string, JsonSchema>,
): Record<string, JsonSchema> {
  const out = { ...own };
  const catalogue = catalogueResponses();
  for (const [status, error] of Object.entries(errors)) {
    const mine = own[status];
    if (!mine) {
      out[status] = error;
      continue;
    }
    const resolved =
      typeof error.$ref === "string" ? catalogue[error.$ref.split("/").at(-1)!]! : (error as JsonSchema);
    const schemaOf = (r: JsonSchema) =>
      (r.content as Record<string, { schema: JsonSchema }> | undefined)?.["application/json"]?.schema;
    const ownSchema = schemaOf(mine);
    const errorSchema = schemaOf(resolved);
    out[status] = {
      ...mine,
      description: `${mine.description}; or ${resolved.description}`,
      ...(mine.headers || resolved.headers
        ? { headers: { ...(resolved.headers as JsonSchema), ...(mine.headers as JsonSchema) } }
        : {}),
      content: {
        ...(mine.content as JsonSchema),
        "application/json": {
          schema: ownSchema && errorSchema ? { anyOf: [ownSchema, errorSchema] } : (ownSchema ?? errorSchema),
        },
      },
    };
  }
  return out;
}

/** The catalogue's error bodies as reusable responses. */
function catalogueResponses(): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  for (const [code, { status, title }] of Object.entries(ERROR_CATALOGUE)) {
    const schema =
      code === "validation_failed"
        ? { $ref: "#/components/schemas/HTTPValidationError" }
        : code === "rate_limited"
          ? { $ref: "#/components/schemas/RateLimitError" }
          : { $ref: "#/components/schemas/Error" };
    out[code] = {
      description: `${status} ${title}`,
      ...(code === "rate_limited"
        ? {
            headers: {
              "Retry-After": {
                description: "Seconds until a retry can succeed",
                schema: { type: "integer" },
              },
            },
          }
        : {}),
      content: { "application/json": { schema } },
    };
    if (code !== "rate_limited") {
      const shaped = code === "validation_failed" ? "OpenAIValidationError" : "OpenAIError";
      out[`openai_${code}`] = {
        description: `${status} ${title}, in OpenAI's error shape (the /api/v1/llm surface)`,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${shaped}` } } },
      };
    }
  }
  const retryAfter = {
    "Retry-After": { description: "Seconds until a retry can succeed", schema: { type: "integer" } },
  };
  for (const openai of [false, true]) {
    const provider = openai ? "OpenAIError" : "Error";
    out[`${openai ? "openai_" : ""}rate_limited_or_provider_rate_limited`] = {
      description: `429: the key's rate limit (\`{"error": "Rate limit exceeded"}\`) or the model provider's (${provider})`,
      headers: retryAfter,
      content: {
        "application/json": {
          schema: {
            anyOf: [
              { $ref: "#/components/schemas/RateLimitError" },
              { $ref: `#/components/schemas/${provider}` },
            ],
          },
        },
      },
    };
  }
  return out;
}

const COMPONENT_SCHEMAS: Record<string, JsonSchema> = {
  Error: {
    type: "object",
    description:
      "The catalogue's error body: `error` is the status's title, `message` says what went wrong, `code` the cause (docs/api/errors.md); the contract's 403 of grant and revoke has no `code`.",
    properties: { error: { type: "string" }, message: { type: "string" }, code: { type: "string" } },
    required: ["error", "message"],
  },
  OpenAIError: {
    type: "object",
    description:
      "OpenAI's error body, on /api/v1/llm: `message` says what went wrong, `code` is the catalogue's code, `type` OpenAI's class of error, `param` the field at fault or null.",
    properties: {
      error: {
        type: "object",
        properties: {
          message: { type: "string" },
          type: { type: "string" },
          param: { type: ["string", "null"] },
          code: { type: "string" },
        },
        required: ["message", "type", "param", "code"],
      },
    },
    required: ["error"],
  },
  RateLimitError: {
    type: "object",
    properties: { error: { type: "string", const: "Rate limit exceeded" } },
    required: ["error"],
  },
  ValidationError: {
    type: "object",
    properties: {
      loc: { type: "array", items: { anyOf: [{ type: "string" }, { type: "integer" }] } },
      msg: { type: "string" },
      type: { type: "string" },
      input: {},
      ctx: { type: "object" },
    },
    required: ["loc", "msg", "type"],
  },
  HTTPValidationError: {
    type: "object",
    properties: { detail: { type: "array", items: { $ref: "#/components/schemas/ValidationError" } } },
  },
  OpenAIValidationError: {
    type: "object",
    description:
      "A 422 on /api/v1/llm: the contract's `detail`, and OpenAI's `error` for clients that read only that (`param` the first problem's dotted field, `code` its `type`).",
    properties: {
      detail: { type: "array", items: { $ref: "#/components/schemas/ValidationError" } },
      error: { $ref: "#/components/schemas/OpenAIError/properties/error" },
    },
    required: ["detail", "error"],
  },
};

/** An OpenAPI 3.1 document of the given operations. */
export function buildOpenApiDocument(info: ApiDocumentInfo, operations: readonly ApiOperation[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const tags = new Set<string>();
  const named = new NamedSchemas();
  const sorted = [...operations].sort(
    (a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method),
  );
  for (const operation of sorted) {
    tags.add(operation.tag);
    const path = openApiPath(operation.path);
    const entry: JsonSchema = {
      operationId: operation.operationId,
      summary: operation.summary,
      tags: [operation.tag],
      ...(operation.description || operation.permission
        ? {
            description: [
              operation.description,
              operation.permission ? `Requires the key permission \`${operation.permission}\`.` : undefined,
            ]
              .filter(Boolean)
              .join("\n\n"),
          }
        : {}),
      ...(operation.deprecated ? { deprecated: true } : {}),
      ...(operation.auth === "none" ? { security: [] } : {}),
      ...operation.extensions,
    };
    const params = parameters(operation);
    if (params.length > 0) entry.parameters = params;
    if (operation.body) {
      entry.requestBody = {
        required: true,
        content: {
          [operation.bodyContentType ?? "application/json"]: {
            schema: named.use(jsonSchemaOf(operation.body), operation.bodyName),
          },
        },
      };
    }
    entry.responses = withErrorResponses(
      Object.fromEntries(Object.entries(operation.responses).map(([s, r]) => [s, responseObject(r, named)])),
      errorResponses(operation),
    );
    paths[path] ??= {};
    paths[path][operation.method.toLowerCase()] = entry;
  }
  return {
    openapi: "3.1.0",
    info,
    servers: [{ url: "/" }],
    tags: [...tags].sort().map((name) => ({ name })),
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description: "An API key, or a JWT from `POST /api/v1/authentication/api-keys/exchange-token`.",
        },
      },
      parameters: {
        OnBehalfOf: {
          name: "X-On-Behalf-Of",
          in: "header",
          required: false,
          description:
            "The end user the caller acts for (its own stable id): 1 to 256 printable ASCII characters, not `*` (everyone, in a grant); the principal becomes that user.",
          // `principalUserIdSchema` (principal.ts) written out: its refinement (not `*`) has no JSON Schema of its own.
          schema: { type: "string", minLength: 1, maxLength: 256, pattern: "^[ -~]*$", not: { const: "*" } },
        },
      },
      responses: catalogueResponses(),
      schemas: { ...COMPONENT_SCHEMAS, ...named.schemas },
    },
  };
}
