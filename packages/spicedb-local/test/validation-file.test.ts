import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import { afterEach, describe, expect, it } from "vitest";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "../src/server.ts";
import { runValidationFile } from "../src/validation-file.ts";

const REPO = resolve(import.meta.dirname, "../../..");
let server: RunningSpiceDBLocal | undefined;
let client: v1.ZedClientInterface | undefined;

async function freshClient() {
  server = await startSpiceDBLocal({ host: "127.0.0.1", port: 0, presharedKey: "k" });
  client = v1.NewClient("k", server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
  return client;
}

afterEach(async () => {
  client?.close();
  await server?.close();
});

describe("spicedb/validation.yaml (what `zed validate` checks)", () => {
  it("holds on the real SpiceDB engine: every assertion and expected relation", async () => {
    const report = await runValidationFile(join(REPO, "spicedb/validation.yaml"), await freshClient());
    expect(report.failures).toEqual([]);
    expect(report.relationships).toBeGreaterThanOrEqual(16);
    expect(report.assertions).toBeGreaterThanOrEqual(30);
    expect(report.expectedRelations).toBeGreaterThanOrEqual(6);
  });

  it("reports a wrong assertion and a wrong expected relation (the check can fail)", async () => {
    const original = await readFile(join(REPO, "spicedb/validation.yaml"), "utf8");
    const broken = original
      .replace("assertTrue:\n", 'assertTrue:\n    - "conversation:acme/conv_1#manage@user:acme/carol"\n')
      .replace(
        "assertCaveated:\n",
        'assertCaveated:\n    - "conversation:acme/conv_1#read@user:acme/carol"\n',
      )
      .replace(
        "assertFalse:\n",
        'assertFalse:\n    - \'conversation:acme/conv_public#read@user:acme/zoe with {"subject_organization": "acme"}\'\n',
      )
      .replace(
        '    - "[user:acme/carol] is <conversation:acme/conv_1#reader>"\n',
        '    - "[user:acme/carol] is <conversation:acme/conv_1#writer>"\n    - "[user:acme/zoe] is <conversation:acme/conv_1#reader>"\n',
      )
      .replace('schemaFile: "./schema.zed"', `schemaFile: "${join(REPO, "spicedb/schema.zed")}"`);
    const dir = await mkdtemp(join(tmpdir(), "gw-validation-"));
    await writeFile(join(dir, "broken.yaml"), broken);
    const report = await runValidationFile(join(dir, "broken.yaml"), await freshClient());
    expect(report.failures).toEqual([
      "assertTrue failed: conversation:acme/conv_1#manage@user:acme/carol",
      "assertCaveated failed: conversation:acme/conv_1#read@user:acme/carol",
      'assertFalse failed: conversation:acme/conv_public#read@user:acme/zoe with {"subject_organization": "acme"}',
      "conversation:acme/conv_1#read: [user:acme/carol] is <conversation:acme/conv_1#writer>: no relationship conversation:acme/conv_1#writer@user:acme/carol",
      "conversation:acme/conv_1#read: [user:acme/zoe] is <conversation:acme/conv_1#reader>: no relationship conversation:acme/conv_1#reader@user:acme/zoe",
      "conversation:acme/conv_1#read: expected user:acme/zoe, which does not have it",
    ]);
  });

  it.each([
    ["a public owner", "owner"],
    ["a public reader without the same_organization caveat", "reader"],
    ["a public writer without the same_organization caveat", "writer"],
  ])("the schema refuses %s", async (_what, relation) => {
    const c = await freshClient();
    await c.promises.writeSchema(
      v1.WriteSchemaRequest.create({ schema: await readFile(join(REPO, "spicedb/schema.zed"), "utf8") }),
    );
    const write = c.promises.writeRelationships(
      v1.WriteRelationshipsRequest.create({
        updates: [
          v1.RelationshipUpdate.create({
            operation: v1.RelationshipUpdate_Operation.TOUCH,
            relationship: v1.Relationship.create({
              resource: v1.ObjectReference.create({ objectType: "conversation", objectId: "acme/c" }),
              relation,
              subject: v1.SubjectReference.create({
                object: v1.ObjectReference.create({ objectType: "user", objectId: "*" }),
              }),
            }),
          }),
        ],
      }),
    );
    await expect(write).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/wildcard|\*|caveat/),
    });
  });
});
