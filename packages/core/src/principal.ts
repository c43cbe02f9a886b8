import { z } from "zod";
import { ValidationFailed } from "./errors.ts";
import type { Permission } from "./permissions.ts";
import { headerText, validate } from "./validation.ts";

/** Who a request acts as: an organization's user, through one credential. */
export interface Principal {
  org: string;
  /** The end user from `X-On-Behalf-Of`, else the key's owner. */
  user: string;
  keyId: string;
  permissions: Permission[];
  /** The models the credential's key may use; absent: any the service offers. */
  models?: string[] | undefined;
  /** How the caller proved itself. */
  credential: "api_key" | "jwt";
  /** True when `user` came from `X-On-Behalf-Of`. */
  onBehalfOf: boolean;
  /**
   * True when `user` is not the key's owner (named by `X-On-Behalf-Of` or a
   * token's subject): an end user sees its own usage and what it created,
   * not the organization's (see `organization:read`). Unset: as `onBehalfOf`.
   */
  endUser?: boolean;
  /** The key's response cache (`KeyCacheMode`); absent: off. */
  cache?: Exclude<KeyCacheMode, "off"> | undefined;
}

/**
 * A key's response cache: `off`; `principal`, answers shared only with the
 * same principal (key and end user); `key`, answers of requests that read
 * nothing stored shared by the key's principals (docs/api/cache.md).
 */
export const KEY_CACHE_MODES = ["off", "principal", "key"] as const;
export type KeyCacheMode = (typeof KEY_CACHE_MODES)[number];

/** 1 to 256 printable ASCII characters: a stable end-user id, safe in logs and SpiceDB ids once encoded. */
export const userIdSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x20-\x7e]*$/, "String should contain only printable characters");

/**
 * A principal's own user id (a key's owner, an end user, a token's subject): a user id that is not `*`,
 * which stands for everyone in a grant. A user named `*` could not be told apart from everyone in a
 * resource's grants, nor have a role of theirs revoked.
 */
export const principalUserIdSchema = userIdSchema.refine(
  (id) => id !== "*",
  "'*' stands for everyone in a grant: it cannot be a user's own id",
);

/** Organization ids appear verbatim in SpiceDB object ids, so they keep to its alphabet. */
export const orgIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_-]*$/, "String should match pattern '^[A-Za-z0-9_-]+$'");

export const ON_BEHALF_OF_HEADER = "x-on-behalf-of";

/** Built once: a schema built per request pays zod's compilation on every call. */
const onBehalfOfHeader = z.object({ [ON_BEHALF_OF_HEADER]: principalUserIdSchema });

/**
 * Validates the `X-On-Behalf-Of` values of a request, as Node's
 * `headersDistinct` gives them (422 at `["header","x-on-behalf-of"]`). Node
 * would join repeated headers with ", ": the header must come once, since a
 * list is not one user id. A value is read as UTF-8 where its bytes are
 * (`headerText`), so a 422 echoes it as it was sent.
 */
export function parseOnBehalfOf(values: string[] | undefined): string | undefined {
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw new ValidationFailed([
      {
        loc: ["header", ON_BEHALF_OF_HEADER],
        msg: "X-On-Behalf-Of must be sent once",
        type: "value_error",
      },
    ]);
  }
  return validate("header", onBehalfOfHeader, {
    [ON_BEHALF_OF_HEADER]: headerText(values[0]!),
  })[ON_BEHALF_OF_HEADER];
}
