/** The closed vocabulary of API-key permissions. */
export const PERMISSIONS = [
  "authorization:read",
  "authorization:write",
  "responses:read",
  "responses:write",
  "conversations:read",
  "conversations:write",
  "evals:read",
  "evals:write",
  "sandbox:read",
  "sandbox:write",
  "usage:read",
  "mcp:read",
  "mcp:write",
  "mcp:call",
  "admin:api-keys",
] as const;

export type Permission = (typeof PERMISSIONS)[number];

/** What a key gets when it is created without a list: everything but key administration. */
export const DEFAULT_PERMISSIONS: readonly Permission[] = PERMISSIONS.filter((p) => p !== "admin:api-keys");

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}
