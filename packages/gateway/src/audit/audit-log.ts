import {
  encodeId,
  type Logger,
  type Principal,
  type RedisClient,
  type ResourceRef,
  type ResourceType,
  type Role,
} from "@gw/core";

export const AUDIT_ACTIONS = ["register", "delete", "grant", "revoke"] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** `allowed`: the write landed; `denied`: not an owner (403); `conflict`: 409; `error`: it failed otherwise. */
export type AuditOutcome = "allowed" | "denied" | "conflict" | "error";

/** What happened, as a request describes it before it runs. */
export interface AuditEvent {
  action: AuditAction;
  resource: ResourceRef;
  /** The user whose role changes (grant, revoke). */
  subject?: string;
  role?: Role;
  expiresAt?: Date;
}

/** One audit record, as stored and as listed. Nothing in it is a secret. */
export interface AuditRecord {
  /** The Redis stream entry id: the cursor of listings. */
  id: string;
  time: string;
  organization: string;
  actor: { userId: string; keyId: string; credential: Principal["credential"] };
  action: AuditAction;
  resourceType: ResourceType;
  resourceId: string;
  subject?: string;
  role?: Role;
  expiresAt?: string;
  outcome: AuditOutcome;
  requestId: string;
  /** The ZedToken of the write, when one landed. */
  zedToken?: string;
}

export interface AuditPage {
  data: AuditRecord[];
  next_cursor: string | null;
}

export interface AuditLogOptions {
  retentionDays: number;
  /** Records kept per organization, approximately. */
  maxEntries: number;
  logger?: Logger;
}

/** A stream entry id, `<ms>-<seq>`: what audit cursors are. */
export const AUDIT_CURSOR = /^\d{1,15}-\d{1,15}$/;

/**
 * The audit trail of role changes, in Redis Streams: one stream per
 * organization (`gw:audit:{<org>}`) and one per resource
 * (`gw:audit:{<org>}:<type>:<id>`), written in one transaction (one hash
 * tag, one slot), trimmed to the retention window and a length cap. Every
 * record is also logged as one structured line.
 */
export class AuditLog {
  private readonly redis: RedisClient;
  private readonly retentionMs: number;
  private readonly maxEntries: number;
  private readonly logger: Logger | undefined;

  constructor(redis: RedisClient, options: AuditLogOptions) {
    this.redis = redis;
    this.retentionMs = options.retentionDays * 86_400_000;
    this.maxEntries = options.maxEntries;
    this.logger = options.logger;
  }

  /** Appends a record; returns it with its id. Throws if Redis cannot keep it. */
  async append(record: Omit<AuditRecord, "id">): Promise<AuditRecord> {
    const orgKey = organizationStream(record.organization);
    const resourceKey = resourceStream(record.organization, {
      type: record.resourceType,
      id: record.resourceId,
    });
    const json = JSON.stringify(record);
    const oldest = `${Math.max(0, Date.now() - this.retentionMs)}-0`;
    const results = await this.redis
      .multi()
      .xadd(orgKey, "MAXLEN", "~", this.maxEntries, "*", "record", json)
      .xtrim(orgKey, "MINID", "~", oldest)
      .xadd(resourceKey, "MAXLEN", "~", this.maxEntries, "*", "record", json)
      .xtrim(resourceKey, "MINID", "~", oldest)
      .pexpire(resourceKey, this.retentionMs)
      .exec();
    const failed = results?.find(([err]) => err)?.[0];
    if (failed || !results) throw failed ?? new Error("audit transaction was discarded");
    const stored = { id: results[0]![1] as string, ...record };
    this.logger?.info({ audit: stored }, "audit");
    return stored;
  }

  /** An organization's records, newest first. */
  forOrganization(org: string, page: { limit: number; cursor?: string | undefined }): Promise<AuditPage> {
    return this.read(organizationStream(org), page);
  }

  /** One resource's records, newest first. */
  forResource(org: string, resource: ResourceRef, page: { limit: number; cursor?: string | undefined }) {
    return this.read(resourceStream(org, resource), page);
  }

  private async read(key: string, page: { limit: number; cursor?: string | undefined }): Promise<AuditPage> {
    const entries = await this.redis.xrevrange(
      key,
      page.cursor ? `(${page.cursor}` : "+",
      "-",
      "COUNT",
      page.limit + 1,
    );
    const data = entries.slice(0, page.limit).map(([id, fields]) => ({
      id,
      ...(JSON.parse(fields[fields.indexOf("record") + 1]!) as Omit<AuditRecord, "id">),
    }));
    return { data, next_cursor: entries.length > page.limit ? (data.at(-1)?.id ?? null) : null };
  }
}

const organizationStream = (org: string) => `gw:audit:{${org}}`;
const resourceStream = (org: string, resource: ResourceRef) =>
  `gw:audit:{${org}}:${resource.type}:${encodeId(resource.id)}`;
