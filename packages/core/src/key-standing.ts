/** Why a stored API key may not act now. */
export type KeyRefusal = "revoked" | "expired";

/**
 * Whether a stored API key may act at `now` (wall time, milliseconds since
 * the epoch): it must be active and unexpired. The one rule every surface
 * that acts with a key asks: the gateway's authentication, its MCP proxy and
 * console, the service's eval and background runs.
 */
export function keyRefusal(
  key: { status: string; expiresAt?: string | null | undefined },
  now: number,
): KeyRefusal | undefined {
  if (key.status !== "active") return "revoked";
  if (key.expiresAt != null && Date.parse(key.expiresAt) <= now) return "expired";
  return undefined;
}
