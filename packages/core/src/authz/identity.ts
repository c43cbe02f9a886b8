/**
 * How gateway identities become SpiceDB object ids (docs/adr/0004-org-scoped-identities.md).
 * Every id is scoped by organization, `<org>/<id>`, so `conversation:acme/conv_1`
 * and `user:acme/alice` read naturally in `zed relationship read`, and no id of
 * one organization can name another's object. Characters outside
 * `[A-Za-z0-9_-]` are written as `=XX` (hex of each UTF-8 byte), which keeps
 * ids inside SpiceDB's alphabet and is reversible.
 */

export const RESOURCE_TYPES = [
  "completion",
  "file",
  "vector_store",
  "conversation",
  "response",
  "skill",
  "mcp_server",
  "guardrail",
] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/**
 * Resource types whose ids the service issues and whose lifecycle it owns,
 * each with the service's own delete. The service makes the creator the
 * owner when it creates one and removes its relationships with its content;
 * the platform API neither registers nor deletes them, so no registration can
 * take an id the service issued, and no authorization is dropped while the
 * content lives. A new service-issued type is one more line here.
 */
export const SERVICE_ISSUED_TYPES = {
  conversation: "DELETE /api/v1/llm/conversations/{id}",
  response: "DELETE /api/v1/llm/responses/{id}",
  completion: "DELETE /api/v1/llm/chat/completions/{id}",
  mcp_server: "DELETE /api/v1/mcp/servers/{id}",
  guardrail: "DELETE /api/v1/guardrails/{id}",
} as const satisfies Partial<Record<ResourceType, string>>;

export function isServiceIssued(type: ResourceType): type is keyof typeof SERVICE_ISSUED_TYPES {
  return Object.hasOwn(SERVICE_ISSUED_TYPES, type);
}

/**
 * Resource types of which the service issues some ids while other backends
 * still register theirs (files held elsewhere): an id of the shape the service
 * issues (`file_` and 32 hex digits) is the service's as a whole type's ids
 * are in `SERVICE_ISSUED_TYPES`, so no one registers it before or after the
 * service issues it, nor drops its authorization while its content lives.
 */
export const SERVICE_ISSUED_IDS = {
  file: { shape: /^file_[0-9a-f]{32}$/, delete: "DELETE /api/v1/llm/files/{id}" },
  vector_store: { shape: /^vs_[0-9a-f]{32}$/, delete: "DELETE /api/v1/llm/vector_stores/{id}" },
} as const satisfies Partial<Record<ResourceType, { shape: RegExp; delete: string }>>;

/**
 * The service's own delete of the resource when the service issues its id
 * (its whole type, or an id of the shape it issues); `undefined` for a
 * resource other backends register.
 */
export function serviceIssuedDelete(type: ResourceType, id: string): string | undefined {
  if (isServiceIssued(type)) return SERVICE_ISSUED_TYPES[type];
  const ids = (SERVICE_ISSUED_IDS as Partial<Record<ResourceType, { shape: RegExp; delete: string }>>)[type];
  return ids?.shape.test(id) ? ids.delete : undefined;
}

export const ROLES = ["owner", "writer", "reader"] as const;
export type Role = (typeof ROLES)[number];

/** The schema permission that a role check asks for: the hierarchy lives in the schema. */
export const PERMISSION_FOR_ROLE: Record<Role, "manage" | "write" | "read"> = {
  owner: "manage",
  writer: "write",
  reader: "read",
};

/** The user id that means every authenticated user of the organization. */
export const PUBLIC_USER = "*";

const SAFE = /[A-Za-z0-9_-]/;

export function encodeId(value: string): string {
  let out = "";
  for (const char of value) {
    if (SAFE.test(char)) out += char;
    else
      for (const byte of Buffer.from(char, "utf8"))
        out += `=${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

export function decodeId(encoded: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    if (encoded[i] === "=") {
      bytes.push(Number.parseInt(encoded.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(encoded.charCodeAt(i));
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/**
 * SpiceDB's longest object id, in bytes; an encoded id is ASCII, so bytes
 * are characters. A request cannot name a longer one: SpiceDB refuses the
 * whole call (`InvalidArgument`), so callers ask `fitsObjectId` first.
 */
export const MAX_OBJECT_ID_LENGTH = 1024;

/**
 * Whether the organization's `id` names a SpiceDB object once scoped and
 * encoded (`scopedId`): one that does not fits no relationship, so no such
 * resource exists, and a check of it is answered "no" without asking. Counts
 * without building the id, and stops at the limit, however long `id` is.
 */
export function fitsObjectId(org: string, id: string): boolean {
  let length = org.length + 1;
  for (const char of id) {
    length += SAFE.test(char) ? 1 : 3 * Buffer.byteLength(char, "utf8");
    if (length > MAX_OBJECT_ID_LENGTH) return false;
  }
  return true;
}

/** `<org>/<encoded id>`: the org is already in SpiceDB's alphabet (see `orgIdSchema`). */
export function scopedId(org: string, id: string): string {
  return `${org}/${encodeId(id)}`;
}

/** The inverse of `scopedId`. */
export function unscopedId(objectId: string): { org: string; id: string } {
  const slash = objectId.indexOf("/");
  return { org: objectId.slice(0, slash), id: decodeId(objectId.slice(slash + 1)) };
}

/** The SpiceDB subject id of a user of an organization; `*` is the wildcard. */
export function subjectId(org: string, user: string): string {
  return user === PUBLIC_USER ? PUBLIC_USER : scopedId(org, user);
}
