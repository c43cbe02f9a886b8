import { describe, expect, it } from "vitest";
import { llmError, useStack } from "./stack.ts";

const stack = useStack();
const RESPONSES = "/api/v1/llm/responses";
const AUTHZ = "/api/v1/authorization/llm";

/** Every text the model was sent, from the request the fake provider recorded after `from`. */
const textsSentSince = (from: number) =>
  stack.llm.requests.slice(from).flatMap((r) => r.body.messages.map((m) => m.content ?? ""));

describe("a turn's context is checked where it comes from, at the time of the turn", () => {
  it("alice revokes bob on R1: a response continuing bob's R2 (which continued R1) is 404 naming R1, and R1's text never reaches the model", async () => {
    const key = await stack.createKey();
    const as = (user: string, path: string, json?: unknown) => stack.call(key.secret, path, { json, user });
    const r1 = await as("alice", RESPONSES, { input: "alice's secret plan" });
    expect(r1.status).toBe(200);
    const r1Id = (await r1.json()).id as string;
    const role = { resourceType: "response", resourceId: r1Id, userId: "bob", role: "reader" };
    expect((await as("alice", `${AUTHZ}/grant`, role)).status).toBe(204);

    const r2 = await as("bob", RESPONSES, { input: "bob's follow-up", previous_response_id: r1Id });
    expect(r2.status).toBe(200);
    const r2Id = (await r2.json()).id as string;
    // While bob may read R1, continuing R2 carries R1's text, as the chain's context.
    let asked = stack.llm.requests.length;
    const allowed = await as("bob", RESPONSES, { input: "and then?", previous_response_id: r2Id });
    expect(allowed.status).toBe(200);
    expect(textsSentSince(asked)).toContain("alice's secret plan");

    expect((await as("alice", `${AUTHZ}/revoke`, role)).status).toBe(204);
    expect((await stack.call(key.secret, `${RESPONSES}/${r1Id}`, { user: "bob" })).status).toBe(404);
    asked = stack.llm.requests.length;
    const refused = await as("bob", RESPONSES, { input: "and now?", previous_response_id: r2Id });
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual(llmError("not_found", `No response ${r1Id}`));
    // Nothing was sent to the model, nor counted (the input tokens route draws the same context).
    expect(stack.llm.requests.length).toBe(asked);
    const counted = await as("bob", `${RESPONSES}/input_tokens`, {
      input: "and now?",
      previous_response_id: r2Id,
    });
    expect(counted.status).toBe(404);
    // bob's own R2 stays his: a turn on it alone, with no earlier context, is not what was refused.
    expect((await stack.call(key.secret, `${RESPONSES}/${r2Id}`, { user: "bob" })).status).toBe(200);
  });

  it("an item_reference into a response bob can no longer read is 404, as it was before he could", async () => {
    const key = await stack.createKey();
    const r1 = await stack.call(key.secret, RESPONSES, { json: { input: "kept apart" }, user: "alice" });
    const { id, output } = await r1.json();
    const role = { resourceType: "response", resourceId: id, userId: "bob", role: "reader" };
    const reference = { input: [{ type: "item_reference", id: output[0].id }] };
    await stack.call(key.secret, `${AUTHZ}/grant`, { json: role, user: "alice" });
    expect((await stack.call(key.secret, RESPONSES, { json: reference, user: "bob" })).status).toBe(200);
    await stack.call(key.secret, `${AUTHZ}/revoke`, { json: role, user: "alice" });
    const refused = await stack.call(key.secret, RESPONSES, { json: reference, user: "bob" });
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual(llmError("not_found", `No item ${output[0].id}`, "input"));
  });
});
