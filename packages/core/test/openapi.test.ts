import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type ApiOperation, buildOpenApiDocument, documentedAs, jsonSchemaOf } from "../src/openapi.ts";

const info = { title: "t", version: "1", description: "d" };
type Paths = Record<string, Record<string, Record<string, unknown>>>;
const pathsOf = (operations: ApiOperation[]) => buildOpenApiDocument(info, operations).paths as Paths;

const base: ApiOperation = {
  method: "GET",
  path: "/api/v1/things/:id",
  operationId: "getThing",
  summary: "A thing",
  tag: "Things",
  responses: { 200: { description: "The thing", schema: z.object({ id: z.string() }) } },
};

describe("buildOpenApiDocument", () => {
  it("turns Express templates into OpenAPI paths with required path parameters", () => {
    const get = pathsOf([base])["/api/v1/things/{id}"]?.get;
    expect(get?.parameters).toEqual([
      { name: "id", in: "path", required: true, schema: { type: "string" } },
      { $ref: "#/components/parameters/OnBehalfOf" },
    ]);
  });

  it("gives a public operation no security and no X-On-Behalf-Of; an authenticated one the catalogue's errors", () => {
    const paths = pathsOf([{ ...base, path: "/public", operationId: "pub", auth: "none" }, base]);
    expect(paths["/public"]?.get).toMatchObject({ security: [] });
    expect(paths["/public"]?.get?.parameters).toBeUndefined();
    expect(Object.keys(paths["/public"]?.get?.responses as object)).toEqual(["200"]);
    // 400: a path parameter of malformed percent-encoding; 422: an X-On-Behalf-Of that is not valid.
    expect(Object.keys(paths["/api/v1/things/{id}"]?.get?.responses as object)).toEqual([
      "200",
      "400",
      "401",
      "403",
      "422",
      "429",
      "503",
    ]);
  });

  it("puts named schemas in components once, and refuses two different schemas under one name", () => {
    const named = (schema: z.ZodType, operationId: string): ApiOperation => ({
      ...base,
      operationId,
      path: `/${operationId}`,
      responses: { 200: { description: "x", schema, name: "Thing" } },
    });
    const thing = z.object({ id: z.string() });
    const document = buildOpenApiDocument(info, [named(thing, "a"), named(thing, "b")]);
    expect((document.components as { schemas: object }).schemas).toHaveProperty(
      "Thing",
      jsonSchemaOf(thing, "output"),
    );
    expect(() =>
      buildOpenApiDocument(info, [named(thing, "a"), named(z.object({ n: z.int() }), "b")]),
    ).toThrow(/Two different schemas are named Thing/);
  });
});

describe("jsonSchemaOf", () => {
  it("describes a schema documented by hand as told, wherever it is nested", () => {
    const hidden = documentedAs(
      z.unknown().transform((v) => String(v)),
      () => ({ type: "string", description: "told" }),
    );
    expect(jsonSchemaOf(z.object({ a: z.array(hidden) }))).toMatchObject({
      properties: { a: { type: "array", items: { type: "string", description: "told" } } },
    });
  });

  it("keeps the default of a preprocessed value", () => {
    const limit = z.preprocess((v) => Number(v), z.int()).default(20);
    expect(jsonSchemaOf(limit)).toEqual({
      type: "integer",
      minimum: Number.MIN_SAFE_INTEGER,
      maximum: Number.MAX_SAFE_INTEGER,
      default: 20,
    });
  });
});
