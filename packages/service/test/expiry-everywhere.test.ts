import { describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

// Real time: SpiceDB's own clock ends the owner relationship, as it would in production.
const stack = useStack({ RESPONSE_RETENTION: "3s", RETENTION_SWEEP_INTERVAL: "1h" });
const AUTHZ = "/api/v1/authorization/llm";

describe("content past its retention, before the sweep", () => {
  it.each([
    ["response", "/api/v1/llm/responses", { input: "short-lived" }],
    [
      "completion",
      "/api/v1/llm/chat/completions",
      { messages: [{ role: "user", content: "short-lived" }], store: true },
    ],
  ] as const)(
    "a %s is gone from check, lookups and grants at once, for its owner and its grantees",
    async (type, path, body) => {
      const key = await stack.createKey();
      const as = (user: string, p: string, json?: unknown) => stack.call(key.secret, p, { json, user });
      const created = await as("alice", path, body);
      expect(created.status).toBe(200);
      const id = (await created.json()).id as string;
      // A grant asked to last longer than the content ends with it.
      const far = new Date(Date.now() + 86_400_000).toISOString();
      const grant = (userId: string, expiresAt?: string) =>
        as("alice", `${AUTHZ}/grant`, {
          resourceType: type,
          resourceId: id,
          userId,
          role: "reader",
          ...(expiresAt ? { expiresAt } : {}),
        });
      expect((await grant("bob", far)).status).toBe(204);
      expect((await grant("carol")).status).toBe(204);
      const check = async (user: string) =>
        (await (await as(user, `${AUTHZ}/check?resourceType=${type}&resourceId=${id}&role=reader`)).json())
          .allowed as boolean;
      const listed = async (user: string) =>
        (
          (await (await as(user, `${AUTHZ}/resources?resourceType=${type}&role=reader`)).json()).data as {
            resourceId: string;
          }[]
        ).map((r) => r.resourceId);
      for (const user of ["alice", "bob", "carol"]) {
        expect(await check(user)).toBe(true);
        expect(await listed(user)).toEqual([id]);
      }

      // Once its retention has passed, every path at once, with no sweep run.
      await vi.waitFor(async () => expect(await check("alice")).toBe(false), {
        timeout: 15_000,
        interval: 200,
      });
      for (const user of ["alice", "bob", "carol"]) {
        expect(await check(user)).toBe(false);
        expect(await listed(user)).toEqual([]);
      }
      const late = await grant("dave");
      expect(late.status).toBe(403);
      expect((await as("alice", `${path}/${id}`)).status).toBe(404);
    },
  );
});
