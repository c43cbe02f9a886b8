/** The closed vocabulary of API-key permissions. */
export const PERMISSIONS = [
  "authorization:read",
  "authorization:write",
  "responses:read",
  "responses:write",
  "conversations:read",
  "conversations:write",
  "files:read",
  "files:write",
  "vector_stores:read",
  "vector_stores:write",
  "evals:read",
  "evals:write",
  "sandbox:read",
  "sandbox:write",
  "usage:read",
  "mcp:read",
  "mcp:write",
  "mcp:call",
  "guardrails:read",
  "guardrails:write",
  "admin:api-keys",
  "organization:read",
  "admin:console",
] as const;

export type Permission = (typeof PERMISSIONS)[number];

/**
 * Lets the end users a key acts for (`X-On-Behalf-Of`, exchanged tokens) see
 * the organization-wide views its owner sees: usage of every end user and
 * key, every eval schedule and its runs. Without it an end user sees only
 * its own. The key acting as its owner sees them either way.
 */
export const ORGANIZATION_VIEWS: Permission = "organization:read";

/**
 * What a model call needs, whoever makes it: the routes that call a model
 * (`/responses`, `/chat/completions`) declare it, and an eval run checks its
 * creator key for it at every run.
 */
export const MODEL_CALLS: Permission = "responses:write";

/** What a key gets when it is created without a list: everything but key administration, `organization:read` and the admin console. */
export const DEFAULT_PERMISSIONS: readonly Permission[] = PERMISSIONS.filter(
  (p) => p !== "admin:api-keys" && p !== ORGANIZATION_VIEWS && p !== "admin:console",
);

/** The end user a principal is confined to (its own usage and creations), or `undefined` when it sees its organization's. */
export function ownViewOf(principal: {
  user: string;
  permissions: readonly string[];
  onBehalfOf: boolean;
  endUser?: boolean | undefined;
}): string | undefined {
  const endUser = principal.endUser ?? principal.onBehalfOf;
  return endUser && !principal.permissions.includes(ORGANIZATION_VIEWS) ? principal.user : undefined;
}
