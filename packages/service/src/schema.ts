import { documentedAs, jsonSchemaOf } from "@gw/core/openapi";
import { choosing } from "@gw/core/validation";
import { z } from "zod";

/**
 * A schema chosen by looking at the value: a union whose errors point at the
 * field that is wrong, not at every option that did not fit.
 */
export function chosen<S extends z.ZodType>(choose: (value: unknown) => S) {
  const schema = z.unknown().transform((value, ctx): z.output<S> => {
    const result = choose(value).safeParse(value, { reportInput: true });
    if (result.success) return result.data;
    for (const issue of result.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  });
  // Validation looks into the picked schema too, for its secret fields (`secretField`).
  return documentedAs(choosing(schema, choose), () => anyOfChoices(choose));
}

/** Values of each JSON kind, to see which schemas `choose` picks. */
const ONE_OF_EACH_KIND = ["", 0, true, null, [], {}];

/** For the OpenAPI document: any of the schemas `choose` picks for a value of some JSON kind. */
function anyOfChoices(choose: (value: unknown) => z.ZodType) {
  const seen = new Map<string, Record<string, unknown>>();
  for (const value of ONE_OF_EACH_KIND) {
    const json = jsonSchemaOf(choose(value));
    // `{}` is a schema zod cannot describe (a refusal): it would make the union admit anything.
    if (Object.keys(json).length > 0) seen.set(JSON.stringify(json), json);
  }
  const options = [...seen.values()];
  return options.length === 1 ? options[0]! : { anyOf: options };
}

/**
 * An object told apart by its `type` (`fallback` when it has none): the
 * schemas of the types this service takes, and for any other type a 422 at
 * `type` saying it is not supported.
 */
export function byType<S extends Record<string, z.ZodType>>(what: string, schemas: S, fallback?: string) {
  type T = z.ZodType<z.output<S[keyof S]>>;
  const schema = chosen((value): T => {
    if (typeof value !== "object" || value === null || Array.isArray(value))
      return z.record(z.string(), z.unknown()) as unknown as T;
    const type = (value as { type?: unknown }).type ?? fallback;
    if (typeof type === "string" && Object.hasOwn(schemas, type)) return schemas[type] as T;
    if (typeof type !== "string") return z.looseObject({ type: z.string() }) as unknown as T;
    return z.looseObject({
      type: z.custom(() => false, {
        message: `${what} '${type}' is not supported by this service; supported: ${Object.keys(schemas).join(", ")}`,
        params: { type: "value_error" },
      }),
    }) as unknown as T;
  });
  return documentedAs(schema, () => ({ anyOf: Object.values(schemas).map((one) => jsonSchemaOf(one)) }));
}

/**
 * A field of the OpenAI API this service cannot honour: absent (or a value
 * that asks for nothing, per `harmless`) passes, anything else is a 422
 * naming the field, never a silent drop.
 */
export const notSupported = (what: string, harmless?: (value: unknown) => boolean) =>
  documentedAs(
    z
      .unknown()
      .refine((v) => v === undefined || (harmless?.(v) ?? false), {
        message: `${what} is not supported by this service`,
        params: { type: "value_error" },
      })
      .transform(() => undefined)
      .optional(),
    // In the document: a field to leave out (`not: {}` admits no value), unless some value asks for nothing.
    () => ({ description: `${what} is not supported by this service`, ...(harmless ? {} : { not: {} }) }),
  );

/** A JSON number (not only integers) within bounds; 422 `float_type` otherwise. */
export const float = (min: number, max: number) =>
  documentedAs(
    z
      .custom<number>((v) => typeof v === "number" && Number.isFinite(v), {
        message: "Input should be a valid number",
        params: { type: "float_type" },
      })
      .pipe(z.number().min(min).max(max)),
    () => ({ type: "number", minimum: min, maximum: max }),
  );

/**
 * The top-level fields of a body without those set to `null`: the OpenAI
 * APIs treat an explicit `null` like an absent optional field, and so does
 * this service.
 */
export function withoutNulls(body: unknown): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return body;
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null));
}
