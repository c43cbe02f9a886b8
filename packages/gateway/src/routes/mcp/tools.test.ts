import { expectJsonError } from "@gw/test-kit";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV } from "../../../test/mcp/mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
const upstream = useFakeMcpServer();

const SERVERS = "/api/v1/mcp/servers";

/** A fresh organization where alice registered the fake upstream. */
async function register() {
  const o = await newOrg(gw);
  const as = caller(gw.url, o.secret);
  const created = await as("alice", SERVERS, { json: { name: "docs", url: upstream.url } });
  expect(created.status).toBe(201);
  const { id } = (await created.json()) as { id: string };
  const put = (name: string, json: unknown) =>
    as("alice", `${SERVERS}/${id}/tools/${encodeURIComponent(name)}`, { method: "PUT", json });
  return { as, id, put };
}

describe("PUT …/tools/{tool_name} takes every name GET …/tools lists", () => {
  // 384 bytes encoded each (MCP_MAX_TOOL_NAME_BYTES), as the listing takes them.
  const offered = [
    "été",
    "x".repeat(200),
    "a".repeat(384),
    "two words",
    "ns/tool",
    `${"é".repeat(63)}aaaaaa`,
  ];

  it("a name the listing offers (not MCP's alphabet, past 128 characters): its role set and disabled by the owner", async () => {
    const { as, id, put } = await register();
    upstream.toolList = offered.map((name) => ({ name, annotations: { readOnlyHint: true } }));
    try {
      const listed = await as("alice", `${SERVERS}/${id}/tools`);
      expect(listed.status).toBe(200);
      const names = ((await listed.json()) as { data: { name: string }[] }).data.map((t) => t.name);
      expect(names.sort()).toEqual([...offered].sort());
      for (const name of offered) {
        const writer = await put(name, { required_role: "writer" });
        expect(writer.status, name.slice(0, 10)).toBe(200);
        expect(await writer.json()).toMatchObject({ name, required_role: "writer", offered: true });
        const off = await put(name, { disabled: true });
        expect(off.status, name.slice(0, 10)).toBe(200);
        expect(await off.json()).toMatchObject({ name, required_role: null, disabled: true });
      }
      const after = (await (await as("alice", `${SERVERS}/${id}/tools`)).json()) as {
        data: { name: string; disabled: boolean }[];
      };
      expect(after.data.every((t) => t.disabled)).toBe(true);
    } finally {
      upstream.toolList = undefined;
    }
  });

  it("a name the listing leaves out is refused at the path, saying why as the listing's rule does", async () => {
    const { put } = await register();
    for (const [name, why] of [
      [`${"a".repeat(383)}.`, "the name takes more than 384 bytes encoded (MCP_MAX_TOOL_NAME_BYTES)"],
      ["bell\u0007", "the name holds a control character"],
    ] as const) {
      const refused = await put(name, { required_role: "writer" });
      expect((await expectJsonError(refused, 422)).detail).toEqual([
        { loc: ["path", "tool_name"], msg: `Value error, ${why}`, type: "value_error", input: name },
      ]);
    }
  });
});

describe("PUT …/tools/{tool_name}: a body refused names its field and what is allowed", () => {
  it.each([
    [
      { required_role: "admin" },
      {
        loc: ["body", "required_role"],
        msg: "Input should be 'owner', 'writer' or 'reader'",
        type: "enum",
        input: "admin",
        ctx: { expected: "'owner', 'writer' or 'reader'" },
      },
    ],
    [
      { disabled: "yes" },
      { loc: ["body", "disabled"], msg: "Input should be a valid boolean", type: "bool_type", input: "yes" },
    ],
    [
      { required_role: "reader", disabled: true },
      {
        loc: ["body", "disabled"],
        msg: "Value error, send required_role or disabled, not both",
        type: "value_error",
        input: true,
      },
    ],
    [
      {},
      {
        loc: ["body"],
        msg: "Value error, send required_role (one of 'owner', 'writer', 'reader') or disabled (true or false)",
        type: "value_error",
        input: {},
      },
    ],
  ])("%j: 422 at the field", async (body, issue) => {
    const { put } = await register();
    const refused = await put("search", body);
    expect((await expectJsonError(refused, 422)).detail).toEqual([issue]);
  });

  it("a field misnamed: refused by its name, and told what to send instead", async () => {
    const { put } = await register();
    const refused = await put("search", { role: "reader" });
    expect((await expectJsonError(refused, 422)).detail).toEqual([
      {
        loc: ["body", "role"],
        msg: "Extra inputs are not permitted",
        type: "extra_forbidden",
        input: "reader",
      },
      expect.objectContaining({
        loc: ["body"],
        msg: "Value error, send required_role (one of 'owner', 'writer', 'reader') or disabled (true or false)",
      }),
    ]);
  });
});
