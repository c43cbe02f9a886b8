import { scanKeys } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const stack = useStack();
const RESPONSES = "/api/v1/llm/responses";

/** alice's response on a fresh key, and bob holding `role` on it (none: a stranger in her organization). */
async function aliceResponse(bobRole?: "owner" | "writer" | "reader", bobId = "bob") {
  const key = await stack.createKey();
  const res = await stack.call(key.secret, RESPONSES, {
    json: {
      input: [
        { role: "user", content: "alpha" },
        { role: "user", content: "beta" },
      ],
    },
    user: "alice",
  });
  expect(res.status).toBe(200);
  const response = await res.json();
  if (bobRole) {
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: response.id, userId: bobId, role: bobRole },
      user: "alice",
    });
    expect(grant.status).toBe(204);
  }
  const as = (user: string) => ({
    get: (path = "") => stack.call(key.secret, `${RESPONSES}/${response.id}${path}`, { user }),
    remove: () => stack.call(key.secret, `${RESPONSES}/${response.id}`, { method: "DELETE", user }),
    cancel: () => stack.call(key.secret, `${RESPONSES}/${response.id}/cancel`, { method: "POST", user }),
    chain: () =>
      stack.call(key.secret, RESPONSES, { json: { input: "next", previous_response_id: response.id }, user }),
  });
  return { key, response, as };
}

const checkRole = async (secret: string, user: string, id: string, role: string) => {
  const res = await stack.call(
    secret,
    `/api/v1/authorization/llm/check?resourceType=response&resourceId=${id}&role=${role}`,
    { user },
  );
  return (await res.json()).allowed as boolean;
};

describe("who may do what with a response (API reference §2.1)", () => {
  it.each([
    // role, read, input_items, chain, cancel, delete
    ["owner", 200, 200, 200, 400, 200],
    ["writer", 200, 200, 200, 400, 200],
    ["reader", 200, 200, 200, 403, 403],
    [undefined, 404, 404, 404, 404, 404],
  ] as const)("bob as %s: read %i, input_items %i, chain %i, cancel %i, delete %i", async (role, ...want) => {
    const { as } = await aliceResponse(role);
    const bob = as("bob");
    const got = [
      (await bob.get()).status,
      (await bob.get("/input_items")).status,
      (await bob.chain()).status,
      (await bob.cancel()).status,
      (await bob.remove()).status,
    ];
    expect(got).toEqual(want);
  });

  it("a public writer (`*`) may delete it; another organization's key may not even see it", async () => {
    const { response, as, key } = await aliceResponse("writer", "*");
    const outsider = await stack.createKey();
    for (const path of ["", "/input_items"]) {
      const res = await stack.call(outsider.secret, `${RESPONSES}/${response.id}${path}`, { user: "alice" });
      expect(res.status).toBe(404);
    }
    expect((await as("zoe").remove()).status).toBe(200);
    expect(await checkRole(key.secret, "alice", response.id, "reader")).toBe(false);
  });

  it("chaining from a response the caller cannot read is 404, word for word as for an id that does not exist", async () => {
    const { key, response } = await aliceResponse();
    const chain = async (id: string) => {
      const res = await stack.call(key.secret, RESPONSES, {
        json: { input: "tell me", previous_response_id: id },
        user: "mallory",
      });
      return { status: res.status, body: JSON.stringify(await res.json()).replaceAll(id, "<id>") };
    };
    const before = stack.llm.requests.length;
    const existing = await chain(response.id);
    const unknown = await chain("resp_00000000000000000000000000000000");
    expect(existing.status).toBe(404);
    expect(existing).toEqual(unknown);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("a reader's chained turn sends the whole chain before it: each response's input, then its output", async () => {
    const { key, response, as } = await aliceResponse("reader");
    const second = await (
      await stack.call(key.secret, RESPONSES, {
        json: { input: "gamma", previous_response_id: response.id },
        user: "alice",
      })
    ).json();
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: second.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const res = await stack.call(key.secret, RESPONSES, {
      json: { input: "delta", previous_response_id: second.id, instructions: "Be brief." },
      user: "bob",
    });
    expect(res.status).toBe(200);
    expect(stack.llm.requests.at(-1)!.body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "alpha" },
      { role: "user", content: "beta" },
      { role: "assistant", content: "Echo: beta" },
      { role: "user", content: "gamma" },
      { role: "assistant", content: "Echo: gamma" },
      { role: "user", content: "delta" },
    ]);
    // bob owns what he made; alice's responses stay hers.
    const mine = await res.json();
    expect((await stack.call(key.secret, `${RESPONSES}/${mine.id}`, { user: "bob" })).status).toBe(200);
    expect((await as("bob").remove()).status).toBe(403);
  });
});

describe("DELETE /api/v1/llm/responses/{id}", () => {
  it("removes the record, its input items and every relationship", async () => {
    const { key, response, as } = await aliceResponse("reader");
    const rows = async () =>
      (
        await stack.db.query<{ input: unknown[] }>("SELECT input FROM responses WHERE org = $1 AND id = $2", [
          key.org,
          response.id,
        ])
      ).rows;
    expect(await rows()).toEqual([
      {
        input: ["alpha", "beta"].map((text) =>
          expect.objectContaining({ type: "message", role: "user", content: [{ type: "input_text", text }] }),
        ),
      },
    ]);
    expect(await scanKeys(stack.redis, "gw:resp*")).toEqual([]);
    const remove = await as("alice").remove();
    expect(remove.status).toBe(200);
    expect(await remove.json()).toEqual({ id: response.id, object: "response", deleted: true });
    for (const user of ["alice", "bob"]) {
      expect(await checkRole(key.secret, user, response.id, "reader")).toBe(false);
      expect((await as(user).get()).status).toBe(404);
      expect((await as(user).get("/input_items")).status).toBe(404);
    }
    expect(await rows()).toEqual([]);
    expect((await as("alice").remove()).status).toBe(404);
  });

  it("needs responses:write", async () => {
    const { key, response } = await aliceResponse();
    const readOnly = await stack.createKey({ org: key.org, permissions: ["responses:read"] });
    const res = await stack.call(readOnly.secret, `${RESPONSES}/${response.id}`, {
      method: "DELETE",
      user: "alice",
    });
    expect(res.status).toBe(403);
    expect((await stack.call(readOnly.secret, `${RESPONSES}/${response.id}`, { user: "alice" })).status).toBe(
      200,
    );
  });
});

describe("GET /api/v1/llm/responses/{id}/input_items", () => {
  it("pages the items the response was asked with, as OpenAI pages lists", async () => {
    const key = await stack.createKey();
    const input = Array.from({ length: 5 }, (_, i) => ({ role: "user", content: `m${i}` }));
    const response = await (
      await stack.call(key.secret, RESPONSES, { json: { input }, user: "alice" })
    ).json();
    const list = async (query = "") => {
      const res = await stack.call(key.secret, `${RESPONSES}/${response.id}/input_items${query}`, {
        user: "alice",
      });
      expect(res.status).toBe(200);
      return res.json();
    };
    const texts = (page: { data: { content: { text: string }[] }[] }) =>
      page.data.map((i) => i.content[0]!.text);
    const first = await list("?limit=2");
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect(texts(first)).toEqual(["m4", "m3"]);
    expect(first.first_id).toBe(first.data[0].id);
    expect(first.last_id).toBe(first.data[1].id);
    const rest = await list(`?limit=5&after=${first.last_id}`);
    expect(texts(rest)).toEqual(["m2", "m1", "m0"]);
    expect(rest.has_more).toBe(false);
    const asc = await list("?order=asc");
    expect(texts(asc)).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    expect(asc.data[0]).toEqual({
      type: "message",
      id: expect.stringMatching(/^msg_/),
      status: "completed",
      role: "user",
      content: [{ type: "input_text", text: "m0" }],
    });
    for (const [query, loc] of [
      ["?limit=0", "limit"],
      ["?order=sideways", "order"],
      ["?after=msg_elsewhere", "after"],
      ["?include[]=message.input_image.image_url", "include[]"],
    ]) {
      const res = await stack.call(key.secret, `${RESPONSES}/${response.id}/input_items${query}`, {
        user: "alice",
      });
      expect(res.status, query).toBe(422);
      expect((await res.json()).detail[0].loc).toEqual(["query", loc]);
    }
  });
});
