import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createKey, type RunningStack, stackEnv, startStack } from "./pnpm-start.ts";

/**
 * Conversations and ZedTokens live in Redis, grants in the local SpiceDB: a
 * restart must bring both back, or owners are locked out of what they own.
 */
describe("pnpm start, stopped and started again on the same data directory", () => {
  let stack: RunningStack | undefined;
  let dataDir: string;

  afterAll(async () => {
    await stack?.interrupt();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("answers every check and conversation read as before: after Ctrl-C, and after kill -9 of the local SpiceDB", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gw-restart-"));
    const env = await stackEnv(dataDir);
    stack = await startStack(env);
    const { key } = await createKey(env, "acme", "backend");
    const gateway = stack.gatewayUrl;
    const as = (user: string) => ({
      authorization: `Bearer ${key}`,
      "x-on-behalf-of": user,
      "content-type": "application/json",
    });
    const created = await fetch(`${gateway}/api/v1/llm/conversations`, {
      method: "POST",
      headers: as("alice"),
      body: JSON.stringify({ metadata: { topic: "restarts" } }),
    });
    expect(created.status).toBe(200);
    const conversation = (await created.json()) as { id: string };
    const grant = (user: string) =>
      fetch(`${gateway}/api/v1/authorization/llm/grant`, {
        method: "POST",
        headers: as("alice"),
        body: JSON.stringify({
          resourceType: "conversation",
          resourceId: conversation.id,
          userId: user,
          role: "reader",
        }),
      }).then((r) => r.status);
    expect(await grant("bob")).toBe(204);

    /** What every user gets: the conversation read, then each role check. */
    const answers = async (users: string[]) => {
      const seen: Record<string, unknown> = {};
      for (const user of users) {
        const read = await fetch(`${gateway}/api/v1/llm/conversations/${conversation.id}`, {
          headers: as(user),
        });
        const roles: Record<string, boolean> = {};
        for (const role of ["reader", "writer", "owner"]) {
          const check = await fetch(
            `${gateway}/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation.id}&role=${role}`,
            { headers: as(user) },
          );
          roles[role] = ((await check.json()) as { allowed: boolean }).allowed;
        }
        seen[user] = { read: read.status, body: read.status === 200 ? await read.json() : undefined, roles };
      }
      return seen;
    };
    const before = await answers(["alice", "bob", "eve"]);
    expect(before).toMatchObject({
      alice: { read: 200, body: { id: conversation.id }, roles: { reader: true, writer: true, owner: true } },
      bob: { read: 200, roles: { reader: true, writer: false, owner: false } },
      eve: { read: 404, roles: { reader: false, writer: false, owner: false } },
    });

    // 1. Ctrl-C, then start again.
    await stack.interrupt();
    stack = await startStack(env);
    expect(await answers(["alice", "bob", "eve"])).toEqual(before);
    expect(await grant("carol")).toBe(204); // the owner can still share

    // 2. kill -9 of the local SpiceDB once the new grant is in its journal; the stack goes down with it.
    const journalDir = join(dataDir, "spicedb");
    const journaled = async () => {
      for (const file of (await readdir(journalDir)).filter((f) => /^journal\.\d+$/.test(f)))
        if ((await readFile(join(journalDir, file))).includes("acme/carol")) return true;
      return false;
    };
    const deadline = Date.now() + 15_000;
    while (!(await journaled())) {
      if (Date.now() > deadline) throw new Error("carol's grant never reached the journal");
      await new Promise((r) => setTimeout(r, 50));
    }
    const spicedbPid = Number(/"pid":(\d+)[^\n]*local SpiceDB started/.exec(stack.output())?.[1]);
    expect(spicedbPid).toBeGreaterThan(0);
    process.kill(spicedbPid, "SIGKILL");
    await stack.exited;
    expect(stack.output()).toMatch(/a stack process exited; stopping the stack/);

    // 3. Start again, this time with LOG_LEVEL=warn: readiness does not depend on an info line.
    stack = await startStack({ ...env, LOG_LEVEL: "warn" });
    const after = await answers(["alice", "bob", "carol", "eve"]);
    expect(after).toEqual({
      ...before,
      carol: {
        read: 200,
        body: (before.alice as { body: unknown }).body,
        roles: { reader: true, writer: false, owner: false },
      },
    });
    expect(stack.output()).not.toMatch(/"level":30/);
    await stack.interrupt();
    stack = undefined;
  }, 240_000);
});
