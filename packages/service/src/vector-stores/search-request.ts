import { documentedAs, type JsonSchema } from "@gw/core/openapi";
import { z } from "zod";
import { float, notSupported } from "../schema.ts";
import { type AttributeFilter, checkAttributeFilter, InvalidAttributeFilter } from "./attribute-filter.ts";

/** Results of one search at most, and by default (OpenAI's). */
export const MAX_NUM_RESULTS = 50;
export const DEFAULT_NUM_RESULTS = 10;
/** Queries of one search at most, and characters of one. */
export const MAX_QUERIES = 16;
export const MAX_QUERY_CHARS = 4_096;

const comparisonJson: JsonSchema = {
  type: "object",
  title: "Comparison filter",
  properties: {
    type: { enum: ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"] },
    key: { type: "string" },
    value: {
      oneOf: [
        { type: "string" },
        { type: "number" },
        { type: "boolean" },
        { type: "array", items: { oneOf: [{ type: "string" }, { type: "number" }] } },
      ],
    },
  },
  required: ["type", "key", "value"],
  additionalProperties: false,
};

/**
 * OpenAI's attribute filter (`ComparisonFilter` or `CompoundFilter`, nested),
 * checked at the edge by the one compiler the index uses, so a filter the
 * index would refuse is a 422 at this field before anything runs.
 */
export const attributeFilter = documentedAs(
  z.unknown().transform((value, ctx): AttributeFilter => {
    try {
      checkAttributeFilter(value as AttributeFilter);
      return value as AttributeFilter;
    } catch (err) {
      if (!(err instanceof InvalidAttributeFilter)) throw err;
      ctx.addIssue({
        code: "custom",
        message: err.issues[0]?.msg ?? "Invalid filter",
        params: { type: "value_error" },
      });
      return z.NEVER;
    }
  }),
  (): JsonSchema => ({
    description:
      "OpenAI's attribute filter: a comparison, or a compound (`and`, `or`) of filters, nested up to 8 deep",
    oneOf: [
      comparisonJson,
      {
        type: "object",
        title: "Compound filter",
        properties: { type: { enum: ["and", "or"] }, filters: { type: "array", items: { type: "object" } } },
        required: ["type", "filters"],
        additionalProperties: false,
      },
    ],
  }),
);

/**
 * `ranking_options`: chunks are ranked by the cosine similarity of their
 * embedding to the query's (`auto` picks that; `none` asks for no re-ranking,
 * the same). OpenAI's own re-ranker (`default-2024-11-15`) and hybrid search
 * are not run here, so they are refused rather than ignored.
 */
export const rankingOptions = z.strictObject({
  ranker: z
    .enum(["auto", "none", "default-2024-11-15"])
    .refine((r) => r !== "default-2024-11-15", {
      message:
        "ranker 'default-2024-11-15' (OpenAI's re-ranker) is not supported by this service; use 'auto' or 'none'",
      params: { type: "value_error" },
    })
    .optional(),
  score_threshold: float(0, 1).optional(),
  hybrid_search: notSupported("ranking_options.hybrid_search"),
});

export const maxNumResults = z.int().min(1).max(MAX_NUM_RESULTS);

export type RankingOptions = z.output<typeof rankingOptions>;
