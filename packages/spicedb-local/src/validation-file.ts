import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import { toTimestamp } from "@gw/core/authz";
import { parse } from "yaml";

/** zed's validation-file format, the parts this project uses. */
interface ValidationFile {
  schemaFile?: string;
  schema?: string;
  relationships?: string;
  assertions?: { assertTrue?: string[]; assertCaveated?: string[]; assertFalse?: string[] };
  validation?: Record<string, string[]>;
}

export interface ValidationReport {
  relationships: number;
  assertions: number;
  expectedRelations: number;
  failures: string[];
}

interface ParsedRelationship {
  resourceType: string;
  resourceId: string;
  relation: string;
  subjectType: string;
  subjectId: string;
  subjectRelation?: string;
  /** `[name]` or `[name:{json context}]` after the subject. */
  caveat?: { name: string; context?: Record<string, unknown> };
  /** `[expiration:<RFC 3339>]` last. */
  expiresAt?: Date;
}

const RELATIONSHIP =
  /^([a-z][a-z0-9_]*):([^#\s]+)#([a-z][a-z0-9_]*)@([a-z][a-z0-9_]*):([^#\s[]+)(?:#([a-z][a-z0-9_]*))?(?:\[([a-z][a-z0-9_]*)(?::(\{.*\}))?\])?(?:\[expiration:([^\]]+)\])?$/;
/** An assertion: a relationship, optionally `with {json context}` for its caveats. */
const ASSERTION = /^(\S+)(?:\s+with\s+(\{.*\}))?$/;
/** An expected subject; `[...]` after it marks it caveated (conditional). */
const EXPECTED = /^\[([a-z][a-z0-9_]*):([^[\]\s]+)(\[\.\.\.\])?\] is (.+)$/;
const PATH = /<([a-z][a-z0-9_]*):([^#>]+)#([a-z][a-z0-9_]*)>/g;

export function parseRelationship(text: string): ParsedRelationship {
  const m = RELATIONSHIP.exec(text.trim());
  if (!m) throw new Error(`not a relationship: ${text}`);
  return {
    resourceType: m[1]!,
    resourceId: m[2]!,
    relation: m[3]!,
    subjectType: m[4]!,
    subjectId: m[5]!,
    ...(m[6] ? { subjectRelation: m[6] } : {}),
    ...(m[7] ? { caveat: { name: m[7], ...(m[8] ? { context: JSON.parse(m[8]) } : {}) } } : {}),
    ...(m[9] ? { expiresAt: new Date(m[9]) } : {}),
  };
}

/** The relationship without its caveat: what identifies it. */
const relationshipKey = (r: ParsedRelationship) =>
  `${r.resourceType}:${r.resourceId}#${r.relation}@${r.subjectType}:${r.subjectId}${r.subjectRelation ? `#${r.subjectRelation}` : ""}`;

const ref = (objectType: string, objectId: string) => v1.ObjectReference.create({ objectType, objectId });
const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });

/**
 * Runs a zed validation file against a SpiceDB (here: the local server, since
 * `zed` itself cannot be installed everywhere): writes its schema and
 * relationships, then checks every assertion, and every expected relation
 * (the subjects of each permission, and that each named path exists).
 * The target must be empty: use a fresh server.
 */
export async function runValidationFile(
  path: string,
  client: v1.ZedClientInterface,
): Promise<ValidationReport> {
  const file = parse(await readFile(path, "utf8")) as ValidationFile;
  const schema = file.schemaFile
    ? await readFile(resolve(dirname(path), file.schemaFile), "utf8")
    : file.schema;
  if (!schema) throw new Error(`${path}: neither schemaFile nor schema`);
  await client.promises.writeSchema(v1.WriteSchemaRequest.create({ schema }));

  const lines = (file.relationships ?? "").split("\n").filter((l) => l.trim() && !l.trim().startsWith("//"));
  const relationships = lines.map(parseRelationship);
  await client.promises.writeRelationships(
    v1.WriteRelationshipsRequest.create({
      updates: relationships.map((r) =>
        v1.RelationshipUpdate.create({
          operation: v1.RelationshipUpdate_Operation.TOUCH,
          relationship: v1.Relationship.create({
            resource: ref(r.resourceType, r.resourceId),
            relation: r.relation,
            subject: v1.SubjectReference.create({
              object: ref(r.subjectType, r.subjectId),
              optionalRelation: r.subjectRelation ?? "",
            }),
            ...(r.caveat
              ? {
                  optionalCaveat: v1.ContextualizedCaveat.create({
                    caveatName: r.caveat.name,
                    ...(r.caveat.context ? { context: v1.PbStruct.fromJson(r.caveat.context as never) } : {}),
                  }),
                }
              : {}),
            ...(r.expiresAt ? { optionalExpiresAt: toTimestamp(r.expiresAt) } : {}),
          }),
        }),
      ),
    }),
  );
  const stored = new Set(relationships.map(relationshipKey));

  const failures: string[] = [];
  let assertions = 0;
  const { HAS_PERMISSION, CONDITIONAL_PERMISSION, NO_PERMISSION } = v1.CheckPermissionResponse_Permissionship;
  for (const [name, expected, list] of [
    ["assertTrue", HAS_PERMISSION, file.assertions?.assertTrue ?? []],
    ["assertCaveated", CONDITIONAL_PERMISSION, file.assertions?.assertCaveated ?? []],
    ["assertFalse", NO_PERMISSION, file.assertions?.assertFalse ?? []],
  ] as const) {
    for (const text of list) {
      assertions++;
      const a = ASSERTION.exec(text.trim());
      if (!a) throw new Error(`not an assertion: ${text}`);
      const r = parseRelationship(a[1]!);
      const response = await client.promises.checkPermission(
        v1.CheckPermissionRequest.create({
          consistency: FULLY,
          resource: ref(r.resourceType, r.resourceId),
          permission: r.relation,
          subject: v1.SubjectReference.create({ object: ref(r.subjectType, r.subjectId) }),
          ...(a[2] ? { context: v1.PbStruct.fromJson(JSON.parse(a[2])) } : {}),
        }),
      );
      if (response.permissionship !== expected) failures.push(`${name} failed: ${text}`);
    }
  }

  let expectedRelations = 0;
  for (const [key, entries] of Object.entries(file.validation ?? {})) {
    expectedRelations++;
    const [resource, permission] = key.split("#") as [string, string];
    const [resourceType, resourceId] = splitObject(resource);
    const expectedSubjects = new Map<string, string>();
    for (const entry of entries) {
      const m = EXPECTED.exec(entry);
      if (!m) throw new Error(`${key}: not an expected relation: ${entry}`);
      const subject = `${m[1]}:${m[2]}${m[3] ?? ""}`;
      expectedSubjects.set(subject, entry);
      for (const path of m[4]!.matchAll(PATH)) {
        const relationship = `${path[1]}:${path[2]}#${path[3]}@${m[1]}:${m[2]}`;
        if (!stored.has(relationship)) failures.push(`${key}: ${entry}: no relationship ${relationship}`);
      }
    }
    const subjectTypes = new Set([...expectedSubjects.keys()].map((s) => s.split(":")[0]!));
    const conditional = v1.LookupPermissionship.CONDITIONAL_PERMISSION;
    const actual = new Set<string>();
    for (const subjectType of subjectTypes.size ? subjectTypes : new Set(["user"])) {
      const found = await client.promises.lookupSubjects(
        v1.LookupSubjectsRequest.create({
          consistency: FULLY,
          resource: ref(resourceType, resourceId),
          permission,
          subjectObjectType: subjectType,
        }),
      );
      for (const f of found) {
        const caveated = f.subject?.permissionship === conditional ? "[...]" : "";
        actual.add(`${subjectType}:${f.subject?.subjectObjectId}${caveated}`);
      }
    }
    for (const subject of expectedSubjects.keys()) {
      if (!actual.has(subject)) failures.push(`${key}: expected ${subject}, which does not have it`);
    }
    for (const subject of actual) {
      if (!expectedSubjects.has(subject)) failures.push(`${key}: ${subject} has it but is not listed`);
    }
  }
  return { relationships: relationships.length, assertions, expectedRelations, failures };
}

function splitObject(text: string): [string, string] {
  const colon = text.indexOf(":");
  return [text.slice(0, colon), text.slice(colon + 1)];
}
