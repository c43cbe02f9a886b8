import { documentedAs, jsonSchemaOf } from "@gw/core/openapi";
import { userIdSchema } from "@gw/core/principal";
import { z } from "zod";

/**
 * Which end users a key, and every token exchanged from it, may act for:
 * `any` (the default, and what keys made before the policy existed have),
 * `none` (its owner only), or `{prefixes}`: users whose id starts with one
 * of them. Acting as the key's own owner is always allowed.
 */
export type OnBehalfOfPolicy = "any" | "none" | { prefixes: string[] };

const MAX_PREFIXES = 32;

const prefixesObject = z.strictObject({
  prefixes: z
    .array(userIdSchema)
    .min(1)
    .max(MAX_PREFIXES)
    .refine((list) => new Set(list).size === list.length, "List should not contain duplicates"),
});
const modes = z.enum(["any", "none"]);

/** `"any"`, `"none"` or `{"prefixes": [...]}`, judged by its shape so a problem is reported inside the form it resembles. */
export const onBehalfOfSchema = documentedAs(
  z.unknown().transform((value, ctx): OnBehalfOfPolicy => {
    const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
    const result = (isObject ? prefixesObject : modes).safeParse(value, { reportInput: true });
    if (result.success) return result.data;
    for (const issue of result.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  }),
  () => ({ anyOf: [jsonSchemaOf(modes), jsonSchemaOf(prefixesObject)] }),
);

/** Whether a key with this owner and policy may act for `user`. */
export function mayActFor(
  key: { owner: string; onBehalfOf?: OnBehalfOfPolicy | undefined },
  user: string,
): boolean {
  const policy = key.onBehalfOf ?? "any";
  if (user === key.owner || policy === "any") return true;
  return policy !== "none" && policy.prefixes.some((prefix) => user.startsWith(prefix));
}

/** The policy in words, for the 403 that refuses a user outside it. */
export function describeOnBehalfOf(policy: OnBehalfOfPolicy | undefined): string {
  if (policy === undefined || policy === "any") return "any end user";
  if (policy === "none") return "no end user but its owner";
  return `only end users whose id starts with ${policy.prefixes.map((p) => `'${p}'`).join(", ")}`;
}
