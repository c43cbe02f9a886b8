import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, describe, expect, it } from "vitest";
import {
  createKey,
  newDataDir,
  type RunningStack,
  removeDataDir,
  seedPostgres,
  stackEnv,
  startStack,
  workerVectors,
} from "./pnpm-start.ts";

/**
 * Conversations live in PostgreSQL, ZedTokens in Redis, grants in the local
 * SpiceDB: a restart must bring all back, or owners are locked out of what they own.
 */
describe("pnpm start, stopped and started again on the same data directory", () => {
  let stack: RunningStack | undefined;
  let dataDir: string;

  let llm: FakeLLM | undefined;

  afterAll(async () => {
    await stack?.interrupt();
    await llm?.close();
    if (dataDir) await removeDataDir(dataDir);
  });

  it("answers every check and conversation read as before: after Ctrl-C, and after kill -9 of the local SpiceDB", async () => {
    dataDir = await newDataDir("gw-restart-");
    await seedPostgres(dataDir);
    llm = await startFakeLLM();
    const env = await stackEnv(dataDir, {
      LLM_BASE_URL: llm.baseUrl,
      LLM_DEFAULT_MODEL: "echo-small",
      // The run cut short below is ended 1 s after the stop begins, not 10 s (the default).
      WORKERS_SHUTDOWN_GRACE: "1s",
      ...(await workerVectors()),
    });
    stack = await startStack(env);
    const { key } = await createKey(env, { org: "acme", owner: "backend" });
    const gateway = () => stack!.gatewayUrl;
    const as = (user: string) => ({
      authorization: `Bearer ${key}`,
      "x-on-behalf-of": user,
      "content-type": "application/json",
    });
    const createConversation = async (topic: string) => {
      const created = await fetch(`${gateway()}/api/v1/llm/conversations`, {
        method: "POST",
        headers: as("alice"),
        body: JSON.stringify({ metadata: { topic } }),
      });
      expect(created.status).toBe(200);
      return ((await created.json()) as { id: string }).id;
    };
    const grant = (conversation: string, userId: string, expiresAt?: Date) =>
      fetch(`${gateway()}/api/v1/authorization/llm/grant`, {
        method: "POST",
        headers: as("alice"),
        body: JSON.stringify({
          resourceType: "conversation",
          resourceId: conversation,
          userId,
          role: "reader",
          ...(expiresAt ? { expiresAt: expiresAt.toISOString() } : {}),
        }),
      }).then((r) => r.status);
    const check = async (conversation: string, user: string, role: string) => {
      const res = await fetch(
        `${gateway()}/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation}&role=${role}`,
        { headers: as(user) },
      );
      return ((await res.json()) as { allowed: boolean }).allowed;
    };

    const mine = await createConversation("restarts");
    const open = await createConversation("everyone in acme");
    expect(await grant(mine, "bob")).toBe(204);
    expect(await grant(mine, "frank", new Date(Date.now() + 3_600_000))).toBe(204);
    const soon = new Date(Date.now() + 2_000);
    expect(await grant(mine, "gina", soon)).toBe(204);
    expect(await grant(open, "*")).toBe(204); // the caveated wildcard: every user of acme
    expect(await check(mine, "gina", "reader")).toBe(true);
    await until(async () => !(await check(mine, "gina", "reader")), "gina's grant expires");

    /** What every user gets on each conversation: the read, then each role check. */
    const users = ["alice", "bob", "frank", "gina", "eve"];
    const answers = async () => {
      const seen: Record<string, unknown> = {};
      for (const conversation of [mine, open]) {
        for (const user of users) {
          const read = await fetch(`${gateway()}/api/v1/llm/conversations/${conversation}`, {
            headers: as(user),
          });
          const roles: Record<string, boolean> = {};
          for (const role of ["reader", "writer", "owner"])
            roles[role] = await check(conversation, user, role);
          seen[`${conversation === mine ? "mine" : "open"} ${user}`] = {
            read: read.status,
            body: read.status === 200 ? await read.json() : undefined,
            roles,
          };
        }
      }
      return seen;
    };
    const reader = { reader: true, writer: false, owner: false };
    const nothing = { reader: false, writer: false, owner: false };
    const before = await answers();
    expect(before).toMatchObject({
      "mine alice": { read: 200, body: { id: mine }, roles: { reader: true, writer: true, owner: true } },
      "mine bob": { read: 200, body: { id: mine }, roles: reader },
      "mine frank": { read: 200, roles: reader },
      "mine gina": { read: 404, roles: nothing },
      "mine eve": { read: 404, roles: nothing },
      "open eve": { read: 200, body: { id: open }, roles: reader },
    });

    // A background response whose provider never answers is running when the stack is stopped.
    llm.mode = "stall";
    const response = (path = "") => `${gateway()}/api/v1/llm/responses${path}`;
    const queued = (await (
      await fetch(response(), {
        method: "POST",
        headers: as("alice"),
        body: JSON.stringify({ input: "a long answer", background: true }),
      })
    ).json()) as { id: string };
    const statusOf = async () =>
      (
        (await (await fetch(response(`/${queued.id}`), { headers: as("alice") })).json()) as {
          status: string;
        }
      ).status;
    await until(async () => (await statusOf()) === "in_progress", "the background response runs");

    // 1. Ctrl-C, then start again. The stack gives the service the time it lets its runs finish in: the
    // run it had to cut short ends failed saying the service stopped (not, later, as a killed worker's).
    await stack.interrupt();
    expect(stack.output()).toMatch(/stack stopped/);
    llm.mode = "ok";
    stack = await startStack(env);
    expect(await (await fetch(response(`/${queued.id}`), { headers: as("alice") })).json()).toMatchObject({
      status: "failed",
      error: { code: "server_error", message: "The service stopped before the response finished" },
    });
    expect(await answers()).toEqual(before);
    expect(await grant(mine, "carol")).toBe(204); // the owner can still share

    // 2. kill -9 of the local SpiceDB right after the new grant is answered (so stored); the stack goes down with it.
    const spicedbPid = Number(/"pid":(\d+)[^\n]*local SpiceDB started/.exec(stack.output())?.[1]);
    expect(spicedbPid).toBeGreaterThan(0);
    process.kill(spicedbPid, "SIGKILL");
    await stack.exited;
    expect(stack.output()).toMatch(/a stack process exited; stopping the stack/);

    // 3. Start again, this time with LOG_LEVEL=warn: readiness does not depend on an info line.
    stack = await startStack({ ...env, LOG_LEVEL: "warn" });
    users.push("carol");
    const after = await answers();
    expect(after).toMatchObject(before);
    expect(after).toMatchObject({
      "mine carol": { read: 200, body: (before["mine alice"] as { body: unknown }).body, roles: reader },
      "open carol": { read: 200, roles: reader },
    });
    // Only the stack's own announcement is at info: that it is ready.
    expect(stack.output().match(/^.*"level":30.*$/gm)).toEqual([expect.stringMatching(/stack is ready/)]);
    await stack.interrupt();
    stack = undefined;
  }, 240_000);
});

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
