import { describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

const stack = useStack();
const AUTHZ = "/api/v1/authorization/llm";

/** How alice makes each service-issued resource through the service, and where it is read. */
const MADE = {
  conversation: {
    create: "/api/v1/llm/conversations",
    json: { metadata: { topic: "salary" }, items: [{ role: "user", content: "private" }] },
    read: "/api/v1/llm/conversations",
  },
  response: { create: "/api/v1/llm/responses", json: { input: "private" }, read: "/api/v1/llm/responses" },
  completion: {
    create: "/api/v1/llm/chat/completions",
    json: { model: "auto", store: true, messages: [{ role: "user", content: "private" }] },
    read: "/api/v1/llm/chat/completions",
  },
} as const;

/** alice's conversation (with an item), stored response or stored completion, made on a fresh key. */
async function aliceCreates(type: keyof typeof MADE) {
  const key = await stack.createKey();
  const res = await stack.call(key.secret, MADE[type].create, { json: MADE[type].json, user: "alice" });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  return { key, id, path: `${MADE[type].read}/${id}` };
}

const register = (secret: string, user: string, resourceType: string, resourceId: string) =>
  stack.call(secret, `${AUTHZ}/resources`, { json: { resourceType, resourceId }, user });

const checkOwner = async (secret: string, user: string, resourceType: string, resourceId: string) => {
  const query = new URLSearchParams({ resourceType, resourceId, role: "owner" });
  return (await (await stack.call(secret, `${AUTHZ}/check?${query}`, { user })).json()).allowed;
};

describe.each([
  ["conversation", "/api/v1/llm/conversations/{id}"],
  ["response", "/api/v1/llm/responses/{id}"],
  ["completion", "/api/v1/llm/chat/completions/{id}"],
] as const)("a %s id the service issued", (type, serviceDelete) => {
  it("cannot be orphaned through the platform API and then taken over", async () => {
    const { key, id, path } = await aliceCreates(type);

    // alice tries to drop its authorization while the service still holds it: refused, pointing to the service.
    const dropped = await stack.call(key.secret, `${AUTHZ}/resources/${type}/${id}`, {
      method: "DELETE",
      user: "alice",
    });
    expect(dropped.status).toBe(409);
    expect(await dropped.json()).toEqual({
      error: "Conflict",
      message: expect.stringContaining(`DELETE ${serviceDelete}`),
      code: "service_issued_id",
    });
    expect(await checkOwner(key.secret, "alice", type, id)).toBe(true);

    // bob registers it: refused, and he reads nothing.
    const taken = await register(key.secret, "bob", type, id);
    expect(taken.status).toBe(409);
    expect(await taken.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(new RegExp(`A ${type} id is issued by the service`)),
      code: "service_issued_id",
    });
    expect(await checkOwner(key.secret, "bob", type, id)).toBe(false);
    expect((await stack.call(key.secret, path, { user: "bob" })).status).not.toBe(200);
    expect((await stack.call(key.secret, path, { user: "alice" })).status).toBe(200);
  });

  it("cannot be registered by another organization, nor after the service deleted it", async () => {
    const { key, id, path } = await aliceCreates(type);
    const other = await stack.createKey();
    expect((await register(other.secret, "alice", type, id)).status).toBe(409);
    expect(await checkOwner(other.secret, "alice", type, id)).toBe(false);

    // The service's own delete still works, and the id stays unavailable.
    expect((await stack.call(key.secret, path, { method: "DELETE", user: "alice" })).status).toBe(200);
    expect(await checkOwner(key.secret, "alice", type, id)).toBe(false);
    expect((await register(key.secret, "bob", type, id)).status).toBe(409);
    // Any id of the type, issued or not: the platform API registers none.
    expect((await register(key.secret, "bob", type, `${type}_made_up`)).status).toBe(409);
  });

  it("the refusals are in the audit trail as conflicts", async () => {
    const { key, id } = await aliceCreates(type);
    await register(key.secret, "bob", type, id);
    await stack.call(key.secret, `${AUTHZ}/resources/${type}/${id}`, { method: "DELETE", user: "alice" });
    const res = await stack.call(key.secret, `${AUTHZ}/resources/${type}/${id}/audit`, { user: "alice" });
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: { action: string; outcome: string }[] };
    expect(data.map((r) => [r.action, r.outcome])).toEqual([
      ["delete", "conflict"],
      ["register", "conflict"],
    ]);
  });
});
