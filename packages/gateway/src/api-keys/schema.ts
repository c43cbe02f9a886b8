import { type Clock, systemClock } from "@gw/core/clock";
import { onBehalfOfSchema } from "@gw/core/on-behalf-of";
import { PERMISSIONS } from "@gw/core/permissions";
import { KEY_CACHE_MODES, orgIdSchema, principalUserIdSchema, userIdSchema } from "@gw/core/principal";
import { dateTimeSchema } from "@gw/core/rfc3339";
import { z } from "zod";

const quota = z.int().min(1).max(1_000_000_000);
const tokenQuota = z.int().min(1).max(1_000_000_000_000);
/** US dollars; counted in billionths of a dollar, so at least one of those and at most a million dollars a window. */
const dollars = z.number().min(0.000_000_001).max(1_000_000);

export const permissionsSchema = z
  .array(z.enum(PERMISSIONS))
  .max(PERMISSIONS.length)
  .refine((list) => new Set(list).size === list.length, "List should not contain duplicates");

/** One subject's limits: request windows (flat), `tokens` and `spend` windows. */
const unitLimitsShape = {
  second: quota.optional(),
  minute: quota.optional(),
  hour: quota.optional(),
  day: quota.optional(),
  tokens: z
    .strictObject({
      minute: tokenQuota.optional(),
      hour: tokenQuota.optional(),
      day: tokenQuota.optional(),
      month: tokenQuota.optional(),
    })
    .optional(),
  spend: z.strictObject({ day: dollars.optional(), month: dollars.optional() }).optional(),
};

/** A key's limits, e.g. `{"second":5,"tokens":{"minute":100000},"spend":{"month":50},"endUser":{"tokens":{"day":50000}}}`. */
export const limitsSchema = z.strictObject({
  ...unitLimitsShape,
  endUser: z.strictObject(unitLimitsShape).optional(),
});

/** Changes: a number sets a window, `null` removes it (or a whole unit), an absent window stays as it is. */
const unitLimitsPatchShape = {
  second: quota.nullable().optional(),
  minute: quota.nullable().optional(),
  hour: quota.nullable().optional(),
  day: quota.nullable().optional(),
  tokens: z
    .strictObject({
      minute: tokenQuota.nullable().optional(),
      hour: tokenQuota.nullable().optional(),
      day: tokenQuota.nullable().optional(),
      month: tokenQuota.nullable().optional(),
    })
    .nullable()
    .optional(),
  spend: z
    .strictObject({ day: dollars.nullable().optional(), month: dollars.nullable().optional() })
    .nullable()
    .optional(),
};

export const limitsPatchSchema = z.strictObject({
  ...unitLimitsPatchShape,
  endUser: z.strictObject(unitLimitsPatchShape).nullable().optional(),
});

export const endUserLimitsPatchSchema = z.strictObject(unitLimitsPatchShape);

export type UpdateEndUserLimitsInput = z.output<typeof endUserLimitsPatchSchema>;

/** The path of a route about one key: any id, since one that names no key of the organization is a 404. */
export const apiKeyPathSchema = z.object({ id: z.string() });

/** A key's usage, and with `user` that end user's too (the admin API's query, the CLI's `--user`). */
export const keyUsageQuery = z.object({ user: userIdSchema.optional() });

/** A per-key model allowlist: model ids as the service's `LLM_MODELS` names them. */
export const modelsSchema = z
  .array(z.string().min(1).max(256))
  .min(1)
  .max(100)
  .refine((list) => new Set(list).size === list.length, "List should not contain duplicates");

/** A key's response cache: `off`, `principal` or `key` (docs/api/cache.md). */
export const cacheModeSchema = z.enum(KEY_CACHE_MODES);

/** An instant after the clock's wall time, refused as the grant API refuses one (`datetime_future`…). */
const futureInstant = (clock: Clock) => dateTimeSchema({ future: clock });

/** A new key's body; `clock` says when "the future" starts (the gateway's own clock for its route). */
export const createApiKeyBody = (clock: Clock) =>
  z.strictObject({
    org: orgIdSchema,
    owner: principalUserIdSchema,
    name: z.string().min(1).max(128).optional(),
    permissions: permissionsSchema.optional(),
    limits: limitsSchema.optional(),
    models: modelsSchema.optional(),
    expiresAt: futureInstant(clock).optional(),
    onBehalfOf: onBehalfOfSchema.optional(),
    cache: cacheModeSchema.optional(),
  });

/** On the system clock: the CLI's, and the OpenAPI document's. */
export const createApiKeySchema = createApiKeyBody(systemClock);

export type CreateApiKeyInput = z.output<typeof createApiKeySchema>;

/** A key's changes; `clock` as for `createApiKeyBody`. */
export const updateApiKeyBody = (clock: Clock) =>
  z.strictObject({
    name: z.string().min(1).max(128).nullable().optional(),
    permissions: permissionsSchema.optional(),
    limits: limitsPatchSchema.optional(),
    /** `null` lifts the allowlist. */
    models: modelsSchema.nullable().optional(),
    expiresAt: futureInstant(clock).nullable().optional(),
    onBehalfOf: onBehalfOfSchema.optional(),
    cache: cacheModeSchema.optional(),
  });

/** On the system clock: the CLI's, and the OpenAPI document's. */
export const updateApiKeySchema = updateApiKeyBody(systemClock);

export type UpdateApiKeyInput = z.output<typeof updateApiKeySchema>;
