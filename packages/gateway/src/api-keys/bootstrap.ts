import type { Logger } from "@gw/core/logger";
import { PERMISSIONS } from "@gw/core/permissions";
import { hashSecret } from "./secret.ts";
import { type ApiKeyStore, DuplicateSecretError } from "./store.ts";

/**
 * Makes sure a key with the given secret and `admin:api-keys` exists, for
 * automation that needs a first credential. A revoked bootstrap key stays
 * revoked: revocation is final, and a restart must not undo it.
 */
export async function ensureBootstrapAdminKey(
  store: ApiKeyStore,
  secret: string,
  owner: { org: string; user: string },
  logger: Logger,
): Promise<void> {
  const existing = await store.findByHash(hashSecret(secret));
  if (existing) {
    if (existing.status === "revoked") {
      logger.warn({ keyId: existing.id }, "bootstrap admin key is revoked; leaving it revoked");
    } else if (!existing.permissions.includes("admin:api-keys")) {
      await store.update(existing.id, { permissions: [...existing.permissions, "admin:api-keys"] });
      logger.info({ keyId: existing.id }, "bootstrap admin key regained admin:api-keys");
    }
    return;
  }
  try {
    const { record } = await store.create(
      { org: owner.org, owner: owner.user, name: "bootstrap admin", permissions: [...PERMISSIONS] },
      secret,
    );
    logger.info({ keyId: record.id, org: record.org }, "bootstrap admin key created");
  } catch (err) {
    // Another replica created it between our lookup and our write.
    if (!(err instanceof DuplicateSecretError)) throw err;
  }
}
