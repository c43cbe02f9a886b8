import { orgIdSchema, PERMISSIONS, userIdSchema, WINDOWS } from "@gw/core";
import { z } from "zod";
import { onBehalfOfSchema } from "./on-behalf-of.ts";

const quota = z.int().min(1).max(1_000_000_000);

export const permissionsSchema = z
  .array(z.enum(PERMISSIONS))
  .max(PERMISSIONS.length)
  .refine((list) => new Set(list).size === list.length, "List should not contain duplicates");

/** Quotas per window. */
export const limitsSchema = z.strictObject(Object.fromEntries(WINDOWS.map((w) => [w, quota.optional()])));

/** Quota changes: a number sets a window, `null` removes it, an absent window stays as it is. */
export const limitsPatchSchema = z.strictObject(
  Object.fromEntries(WINDOWS.map((w) => [w, quota.nullable().optional()])),
);

const futureInstant = z.iso
  .datetime({ offset: true })
  .refine((value) => Date.parse(value) > Date.now(), "Expiry should be in the future");

export const createApiKeySchema = z.strictObject({
  org: orgIdSchema,
  owner: userIdSchema,
  name: z.string().min(1).max(128).optional(),
  permissions: permissionsSchema.optional(),
  limits: limitsSchema.optional(),
  expiresAt: futureInstant.optional(),
  onBehalfOf: onBehalfOfSchema.optional(),
});

export type CreateApiKeyInput = z.output<typeof createApiKeySchema>;

export const updateApiKeySchema = z.strictObject({
  name: z.string().min(1).max(128).nullable().optional(),
  permissions: permissionsSchema.optional(),
  limits: limitsPatchSchema.optional(),
  expiresAt: futureInstant.nullable().optional(),
  onBehalfOf: onBehalfOfSchema.optional(),
});

export type UpdateApiKeyInput = z.output<typeof updateApiKeySchema>;
