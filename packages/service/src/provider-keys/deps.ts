import { AuditLog } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import { type Resolver, UpstreamPolicy, type Vault } from "@gw/core/mcp";
import type { Postgres } from "@gw/core/postgres";
import type { ServiceConfig } from "../config.ts";
import { ProviderKeyStore } from "./store.ts";

/**
 * Organizations' provider keys as the configuration sets them up, for the
 * service and for eval worker processes: the process's vault (the gateway's
 * `VAULT_KEYS`, from `vaultKeysOf`, resolved before anything starts) and
 * audit trail (which the gateway reads and sweeps), and the upstream rules of
 * MCP servers for their `base_url`s.
 */
export function providerKeyStore(
  config: ServiceConfig,
  vault: Vault,
  deps: { db: Postgres; logger: Logger; clock: Clock; resolver?: Resolver | undefined },
): ProviderKeyStore {
  const { db, logger, clock } = deps;
  if (config.BYOK_ALLOW_PRIVATE_BASE_URLS)
    logger.warn(
      "BYOK_ALLOW_PRIVATE_BASE_URLS: provider keys may go to http and private addresses (development only)",
    );
  return new ProviderKeyStore(db, vault, new AuditLog(db, { retentionMs: undefined, logger, clock }), {
    clock,
    policy: new UpstreamPolicy({
      allowPrivate: config.BYOK_ALLOW_PRIVATE_BASE_URLS,
      allowPrivateSetting: "BYOK_ALLOW_PRIVATE_BASE_URLS",
      ...(deps.resolver ? { resolver: deps.resolver } : {}),
    }),
    connectTimeoutMs: config.LLM_TIMEOUT_MS,
    onUnreadable: (found) => logger.error(found, "an organization's provider key could not be opened"),
  });
}
