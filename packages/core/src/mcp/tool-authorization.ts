import {
  built,
  type ConsistencyTokens,
  consistencyAfter,
  encodeId,
  FULLY_CONSISTENT,
  fitsObjectId,
  isFailedPrecondition,
  type LastWriteRead,
  objectRef,
  organizationTokenKey,
  type ResourceRef,
  type Role,
  type SpiceDBClient,
  scopedId,
  subjectContext,
  tokenKey,
  UNKNOWN_LAST_WRITE,
  unscopedId,
  userRef,
  v1,
} from "../authz/index.ts";
import type { ResourceAuthorization } from "../authz/resource-authorization.ts";
import type { Principal } from "../principal.ts";

/** The role a tool needs on its server, or `null`: disabled, nobody may call it. */
export type ToolRole = Role | null;

const RELATION: Record<Role, string> = {
  reader: "needs_reader",
  writer: "needs_writer",
  owner: "needs_owner",
};
const RELATIONS = [...Object.values(RELATION), "disabled"];
const relationOf = (role: ToolRole) => (role === null ? "disabled" : RELATION[role]);

/** `<org>/<server id>=2F<tool name>`: the server's tools share a prefix, and no tool id is another's. */
export const toolObjectId = (org: string, serverId: string, tool: string) =>
  scopedId(org, `${serverId}/${tool}`);

const server = (serverId: string): ResourceRef => ({ type: "mcp_server", id: serverId });

/**
 * New tools given their default role in one WriteRelationships: each is one
 * update and one precondition, and SpiceDB takes up to 1,000 of each per
 * write by default.
 */
const DEFAULTS_PER_WRITE = 250;
/** Tools decided in one CheckBulkPermissions. */
const CHECKS_PER_CALL = 100;

/**
 * The most `MCP_MAX_TOOL_NAME_BYTES` may be: a tool's SpiceDB id is
 * `<org>/<server id>=2F<name>`, at most 1,024 bytes, and the organization
 * (64) and server id (28) take up to 96 of them.
 */
export const MAX_TOOL_NAME_BYTES = 900;

/**
 * Why the gateway refuses a tool name, or undefined when it takes it: one
 * holding a control character (U+0000 and the like) or that is not
 * well-formed Unicode (it would reach the audit trail and the logs), or longer
 * than `maxBytes` as encoded in its SpiceDB id (each byte outside
 * `[A-Za-z0-9_-]` takes three). The one rule for what an upstream offers and
 * what a caller names.
 */
export function toolNameProblem(name: string, maxBytes: number): string | undefined {
  if (name.length === 0) return "the name is empty";
  if (/\p{Cc}/u.test(name)) return "the name holds a control character";
  if (!name.isWellFormed()) return "the name is not well-formed Unicode";
  // Each character takes at least one byte encoded: a longer name is refused without encoding it.
  const bytes = name.length > maxBytes ? undefined : encodeId(name).length;
  if (bytes === undefined || bytes > maxBytes)
    return `the name takes more than ${maxBytes} bytes encoded (MCP_MAX_TOOL_NAME_BYTES)`;
  return undefined;
}

/**
 * Per-tool roles in SpiceDB (docs/adr/0014-mcp-tools-as-objects.md): each
 * known tool is an `mcp_tool` object linked to its server by one relation
 * naming the role it needs (or `disabled`), and `call` on it is the one
 * decision behind both listing and calling it. Reads are as fresh as the
 * server's last write (a grant, a revoke or a tool policy all write the
 * server's ZedToken), so a revoke on any replica stops the next call.
 */
export class McpToolAuthorization {
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly decisions: Pick<ResourceAuthorization, "checkGoverned">;

  /**
   * `decisions`: the process's resource authorization, which decides `mayCall` as it decides a
   * check on the server itself: as fresh as the server's last write, from its kept decisions when it
   * keeps them (held to that token and to the server's grants' expiries).
   */
  constructor(
    spicedb: SpiceDBClient,
    tokens: ConsistencyTokens,
    decisions: Pick<ResourceAuthorization, "checkGoverned">,
  ) {
    this.spicedb = spicedb;
    this.tokens = tokens;
    this.decisions = decisions;
  }

  /**
   * Sets a tool's role as an owner of its server: lands only while `owner` is
   * still one (a precondition, not a prior check alone).
   */
  async setRole(owner: Principal, serverId: string, tool: string, role: ToolRole): Promise<void> {
    const guard = built(v1.Precondition, {
      operation: v1.Precondition_Operation.MUST_MATCH,
      filter: built(v1.RelationshipFilter, {
        resourceType: "mcp_server",
        optionalResourceId: scopedId(owner.org, serverId),
        optionalRelation: "owner",
        optionalSubjectFilter: built(v1.SubjectFilter, {
          subjectType: "user",
          optionalSubjectId: scopedId(owner.org, owner.user),
        }),
      }),
    });
    await this.write(owner.org, serverId, this.updates(owner.org, serverId, tool, role), [guard]);
  }

  /**
   * The default role of a tool seen for the first time, written only if the
   * tool has no relation yet: an owner's policy, however it raced with this,
   * is never overwritten. Returns whether it was written.
   */
  async setDefault(org: string, serverId: string, tool: string, role: Role): Promise<boolean> {
    return (await this.setDefaults(org, serverId, [{ name: tool, role }])).length === 1;
  }

  /**
   * `setDefault` for many new tools at once, `DEFAULTS_PER_WRITE` to a
   * WriteRelationships, each write landing only if none of its tools has a
   * relation yet. A write that finds one known meanwhile (an owner's policy,
   * another listing) is made again once without the known ones; one that
   * fails again is left for a later listing. Returns the names written.
   */
  async setDefaults(org: string, serverId: string, tools: { name: string; role: Role }[]): Promise<string[]> {
    const written: string[] = [];
    for (let i = 0; i < tools.length; i += DEFAULTS_PER_WRITE) {
      let batch = tools.slice(i, i + DEFAULTS_PER_WRITE);
      for (let attempt = 0; attempt < 2 && batch.length > 0; attempt++) {
        try {
          await this.write(
            org,
            serverId,
            batch.map((t) => this.update(org, serverId, t.name, RELATION[t.role])),
            batch.map((t) => this.unknown(org, serverId, t.name)),
          );
          written.push(...batch.map((t) => t.name));
          break;
        } catch (err) {
          if (!isFailedPrecondition(err)) throw err;
          const known = await this.roles(org, serverId);
          batch = batch.filter((t) => !known.has(t.name));
        }
      }
    }
    return written;
  }

  /** Whether the principal may call the tool (and so see it listed). An unknown tool: false. */
  async mayCall(principal: Principal, serverId: string, tool: string): Promise<boolean> {
    // A name too long for a SpiceDB id names no tool that can exist (asking would fail the call).
    if (!fitsObjectId(principal.org, `${serverId}/${tool}`)) return false;
    const object = built(v1.ObjectReference, {
      objectType: "mcp_tool",
      objectId: toolObjectId(principal.org, serverId, tool),
    });
    return this.decisions.checkGoverned(principal, server(serverId), object, "call");
  }

  /**
   * Of `tools`, those the principal may call: the same decision as
   * `mayCall`, `CHECKS_PER_CALL` tools to a CheckBulkPermissions. A tool
   * whose check failed or is conditional is not callable (fail closed).
   */
  async callable(principal: Principal, serverId: string, tools: string[]): Promise<Set<string>> {
    const allowed = new Set<string>();
    if (tools.length === 0) return allowed;
    const consistency = await this.consistency(principal.org, serverId);
    const subject = userRef(scopedId(principal.org, principal.user));
    const context = subjectContext(principal.org);
    const unique = [...new Set(tools)];
    for (let i = 0; i < unique.length; i += CHECKS_PER_CALL) {
      const batch = unique.slice(i, i + CHECKS_PER_CALL);
      const byId = new Map(batch.map((tool) => [toolObjectId(principal.org, serverId, tool), tool]));
      const response = await this.spicedb.checkBulkPermissions(
        built(v1.CheckBulkPermissionsRequest, {
          consistency,
          items: [...byId.keys()].map((objectId) =>
            built(v1.CheckBulkPermissionsRequestItem, {
              resource: built(v1.ObjectReference, { objectType: "mcp_tool", objectId }),
              permission: "call",
              subject,
              context,
            }),
          ),
        }),
      );
      for (const pair of response.pairs) {
        const tool = byId.get(pair.request?.resource?.objectId ?? "");
        const has =
          pair.response.oneofKind === "item" &&
          pair.response.item.permissionship === v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION;
        if (tool !== undefined && has) allowed.add(tool);
      }
    }
    return allowed;
  }

  /** The role each known tool of the server needs (`null`: disabled), as SpiceDB holds it. */
  async roles(org: string, serverId: string): Promise<Map<string, ToolRole>> {
    const prefix = toolObjectId(org, serverId, "");
    const found = await this.spicedb.readRelationships(
      built(v1.ReadRelationshipsRequest, {
        consistency: await this.consistency(org, serverId),
        relationshipFilter: built(v1.RelationshipFilter, {
          resourceType: "mcp_tool",
          optionalResourceIdPrefix: prefix,
        }),
      }),
    );
    const roles = new Map<string, ToolRole>();
    for (const { relationship } of found) {
      const objectId = relationship?.resource?.objectId;
      if (!relationship || !objectId?.startsWith(prefix)) continue;
      const { id } = unscopedId(objectId);
      const tool = id.slice(serverId.length + 1);
      const role = (Object.keys(RELATION) as Role[]).find((r) => RELATION[r] === relationship.relation);
      roles.set(tool, role ?? null);
    }
    return roles;
  }

  /** Removes every tool relationship of a deleted server. */
  async forgetServer(org: string, serverId: string): Promise<void> {
    await this.spicedb.deleteRelationships(
      built(v1.DeleteRelationshipsRequest, {
        relationshipFilter: built(v1.RelationshipFilter, {
          resourceType: "mcp_tool",
          optionalResourceIdPrefix: toolObjectId(org, serverId, ""),
        }),
      }),
    );
  }

  /** Exactly one relation for the tool: the role's (or `disabled`); the others deleted in the same write. */
  private updates(org: string, serverId: string, tool: string, role: ToolRole): v1.RelationshipUpdate[] {
    const wanted = relationOf(role);
    return RELATIONS.map((relation) => this.update(org, serverId, tool, relation, relation !== wanted));
  }

  private update(org: string, serverId: string, tool: string, relation: string, remove = false) {
    return built(v1.RelationshipUpdate, {
      operation: remove ? v1.RelationshipUpdate_Operation.DELETE : v1.RelationshipUpdate_Operation.TOUCH,
      relationship: built(v1.Relationship, {
        resource: built(v1.ObjectReference, {
          objectType: "mcp_tool",
          objectId: toolObjectId(org, serverId, tool),
        }),
        relation,
        subject: built(v1.SubjectReference, { object: objectRef(org, server(serverId)) }),
      }),
    });
  }

  /** Holds while the tool has no relation at all. */
  private unknown(org: string, serverId: string, tool: string): v1.Precondition {
    return built(v1.Precondition, {
      operation: v1.Precondition_Operation.MUST_NOT_MATCH,
      filter: built(v1.RelationshipFilter, {
        resourceType: "mcp_tool",
        optionalResourceId: toolObjectId(org, serverId, tool),
      }),
    });
  }

  private async write(
    org: string,
    serverId: string,
    updates: v1.RelationshipUpdate[],
    preconditions: v1.Precondition[],
  ): Promise<void> {
    const response = await this.spicedb.writeRelationships(
      built(v1.WriteRelationshipsRequest, { updates, optionalPreconditions: preconditions }),
    );
    const token = response.writtenAt?.token;
    // The server's token: every decision about its tools is read at least as fresh as this.
    if (token)
      await Promise.allSettled([
        this.tokens.set(tokenKey(org, server(serverId)), token),
        this.tokens.set(organizationTokenKey(org), token),
      ]);
  }

  private async consistency(org: string, serverId: string): Promise<v1.Consistency> {
    let last: LastWriteRead;
    try {
      last = await this.tokens.get(tokenKey(org, server(serverId)));
    } catch {
      last = UNKNOWN_LAST_WRITE;
    }
    return last === UNKNOWN_LAST_WRITE ? FULLY_CONSISTENT : consistencyAfter(last);
  }
}

/** A tool's default role: `readOnlyHint: true` needs `reader`, anything else `writer` (least privilege). */
export function defaultToolRole(annotations: { readOnlyHint?: boolean | undefined } | undefined): Role {
  return annotations?.readOnlyHint === true ? "reader" : "writer";
}
