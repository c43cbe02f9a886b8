import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { v1 } from "@gw/core/authz";
import { describe, expect, it, vi } from "vitest";
import {
  acceptsConnections,
  processRunning,
  readRelationshipLines,
  startTestSpiceDB,
  survivors,
} from "../src/index.ts";

const ownerOf = (conversation: string, user: string) =>
  v1.RelationshipUpdate.create({
    operation: v1.RelationshipUpdate_Operation.TOUCH,
    relationship: v1.Relationship.create({
      resource: v1.ObjectReference.create({ objectType: "conversation", objectId: conversation }),
      relation: "owner",
      subject: v1.SubjectReference.create({
        object: v1.ObjectReference.create({ objectType: "user", objectId: user }),
      }),
    }),
  });

describe("test SpiceDBs, served by the worker's SpiceDB host", () => {
  it("are servers of their own in one host process, not in the worker: each with its key and its relationships; closing one frees its port only", async () => {
    const [a, b] = await Promise.all([startTestSpiceDB(), startTestSpiceDB()]);
    expect(a.hostPid).toBe(b.hostPid);
    expect(a.hostPid).not.toBe(process.pid);
    expect(a.port).not.toBe(b.port);
    expect(readFileSync("/proc/self/maps", "utf8")).not.toContain("libspicedb");

    const zed = v1.NewClient(a.presharedKey, a.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    await zed.promises.writeRelationships(
      v1.WriteRelationshipsRequest.create({ updates: [ownerOf("c1", "alice")] }),
    );
    zed.close();
    expect(await readRelationshipLines(a, { resourceType: "conversation" })).toEqual(["owner alice"]);
    expect(await readRelationshipLines(b, { resourceType: "conversation" })).toEqual([]);
    await expect(
      readRelationshipLines(
        { endpoint: a.endpoint, presharedKey: b.presharedKey },
        { resourceType: "conversation" },
      ),
    ).rejects.toThrow(/UNAUTHENTICATED|invalid preshared key/i);

    await a.close();
    expect(await acceptsConnections(a.port)).toBe(false);
    expect(await readRelationshipLines(b, { resourceType: "conversation" })).toEqual([]);
    await b.close();
    expect(await acceptsConnections(b.port)).toBe(false);
  });

  it("is replaced at the next request when it dies, after saying so on the worker's error output", async () => {
    const first = await startTestSpiceDB();
    const written = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      process.kill(first.hostPid, "SIGKILL");
      await vi.waitFor(() =>
        expect(written.mock.calls.map(([text]) => String(text)).join("")).toMatch(
          /the test SpiceDB host exited \(SIGKILL\)/,
        ),
      );
    } finally {
      written.mockRestore();
    }
    await first.close(); // its host took it along
    const second = await startTestSpiceDB();
    expect(second.hostPid).not.toBe(first.hostPid);
    expect(await readRelationshipLines(second, { resourceType: "conversation" })).toEqual([]);
    await second.close();
  });

  it("does not outlive the process that started it, however that process ends", async () => {
    const module = pathToFileURL(resolve(import.meta.dirname, "../src/test-spicedb.ts")).href;
    const script = `const { startTestSpiceDB } = await import(${JSON.stringify(module)});
      const spicedb = await startTestSpiceDB();
      console.log(JSON.stringify({ host: spicedb.hostPid, port: spicedb.port }));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const [line] = await createInterface({ input: child.stdout! })
      [Symbol.asyncIterator]()
      .next()
      .then((next) => [next.value as string]);
    const { host, port } = JSON.parse(line!) as { host: number; port: number };
    expect(processRunning(host)).toBe(true);
    expect(await acceptsConnections(port)).toBe(true);

    child.kill("SIGKILL");
    expect(await survivors([host]), "the host exits once its worker is gone").toEqual([]);
    expect(await acceptsConnections(port)).toBe(false);
  });
});
