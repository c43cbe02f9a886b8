import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { newOrg, type Org } from "../authorization-helpers.ts";
import { useGateway } from "../harness.ts";
import { caller, MCP_ENV, rpc } from "./mcp-helpers.ts";

/**
 * What an upstream MCP server may answer and offer: bytes, tools per server,
 * tool names, new tools registered per listing; each refusal a clear error,
 * counted, and never another organization's trouble.
 */
const gw = useGateway({
  ...MCP_ENV,
  MCP_MAX_ANSWER_BYTES: "1048576",
  MCP_MAX_TOOLS_PER_SERVER: "400",
  MCP_MAX_NEW_TOOLS_PER_LISTING: "100",
  // Limits, not deadlines, are under test: five listings of 5,000 tools at once can take the upstream
  // longer than MCP_ENV's 1.5 s on a busy machine (seen with `pnpm start` running beside the suite).
  MCP_UPSTREAM_TIMEOUT_MS: "15000",
});
const HUGE = 64 * 1024 * 1024;

let upstream: FakeMcpServer;
beforeEach(async () => {
  upstream = await startFakeMcpServer();
});
afterEach(() => upstream?.close());

/** alice of a fresh organization registers `target` as `name`. */
async function register(target: FakeMcpServer, name = "docs"): Promise<{ o: Org; id: string }> {
  const o = await newOrg(gw);
  const res = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
    json: { name, url: target.url },
  });
  expect(res.status).toBe(201);
  return { o, id: (await res.json()).id };
}

/** The sum of a metric's series whose labels include `labels`. */
async function counted(name: string, labels: string): Promise<number> {
  const text = await (await gw.call("/metrics")).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}
const limitCount = (limit: string) => counted("gateway_mcp_upstream_limits_total", `limit="${limit}"`);
const spicedbWrites = () => counted("grpc_client_handled_total", 'grpc_method="WriteRelationships"');

describe("answer bytes", () => {
  it.each(["json", "sse"] as const)(
    "a %s tool result far past MCP_MAX_ANSWER_BYTES is a JSON-RPC error naming the limit; the upstream's connection is closed long before its answer ends; counted",
    async (format) => {
      const { o, id } = await register(upstream);
      const before = await limitCount("answer_bytes");
      upstream.hugeAnswer = { method: "tools/call", bytes: HUGE, format };
      const call = () =>
        rpc(gw.url, o.secret, "alice", id, "tools/call", { name: "search", arguments: { query: "q" } });
      const { status, body } = await call();
      expect(status).toBe(200);
      expect(body.error).toEqual({
        code: -32603,
        message: `MCP server 'docs' (${id}) answered more than 1048576 bytes (MCP_MAX_ANSWER_BYTES)`,
      });
      // The gateway stopped reading: the upstream saw its connection closed with most of its answer unsent.
      await vi.waitFor(() =>
        expect(upstream.hugeAnswers[0]).toMatchObject({ cutOff: true, finished: false }),
      );
      expect(upstream.hugeAnswers[0]!.written).toBeLessThan(HUGE / 2);
      expect((await limitCount("answer_bytes")) - before).toBe(1);
      // The next call, on a fresh upstream session, is answered as usual.
      upstream.hugeAnswer = undefined;
      expect((await call()).body.result).toMatchObject({ content: [{ type: "text", text: "found: q" }] });
    },
  );

  it("a listing past the limit: the proxy's tools/list is a JSON-RPC error, a route that asks the upstream a catalogue 502, the tools' roles still readable", async () => {
    const { o, id } = await register(upstream);
    const as = caller(gw.url, o.secret);
    upstream.hugeAnswer = { method: "tools/list", bytes: HUGE, format: "json" };
    const message = `MCP server 'docs' (${id}) answered more than 1048576 bytes (MCP_MAX_ANSWER_BYTES)`;
    expect((await rpc(gw.url, o.secret, "alice", id, "tools/list")).body.error).toEqual({
      code: -32603,
      message,
    });
    const put = await as("alice", `/api/v1/mcp/servers/${id}/tools/search`, {
      method: "PUT",
      json: { disabled: false },
    });
    expect(put.status).toBe(502);
    expect(await put.json()).toEqual({ error: "Bad Gateway", message, code: "mcp_answer_too_large" });
    const listed = await as("alice", `/api/v1/mcp/servers/${id}/tools`);
    expect(listed.status).toBe(200);
    expect((await listed.json()).data).toEqual([]);
    for (const record of upstream.hugeAnswers) expect(record.finished).toBe(false);
  });
});

describe("tools per server and new tools per listing", () => {
  it("an upstream offering 5,000 tools is refused with a clear error and nothing is written for it, while another organization's calls go on unaffected", async () => {
    const attacker = await startFakeMcpServer();
    try {
      attacker.toolList = Array.from({ length: 5_000 }, (_, i) => ({ name: `tool_${i}` }));
      const evil = await register(attacker, "evil");
      const victim = await register(upstream);
      const before = await limitCount("tools_per_server");
      const [attacks, calls] = await Promise.all([
        Promise.all(
          Array.from({ length: 5 }, () => rpc(gw.url, evil.o.secret, "alice", evil.id, "tools/list")),
        ),
        Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            rpc(gw.url, victim.o.secret, "alice", victim.id, "tools/call", {
              name: "search",
              arguments: { query: `v${i}` },
            }),
          ),
        ),
      ]);
      for (const attack of attacks) {
        expect(attack.status).toBe(200);
        expect(attack.body.error).toEqual({
          code: -32603,
          message: `MCP server 'evil' (${evil.id}) offers more than 400 tools (MCP_MAX_TOOLS_PER_SERVER)`,
        });
      }
      calls.forEach((call, i) => {
        expect(call.status).toBe(200);
        expect(call.body.result).toMatchObject({ content: [{ type: "text", text: `found: v${i}` }] });
      });
      const listed = await caller(gw.url, evil.o.secret)("alice", `/api/v1/mcp/servers/${evil.id}/tools`);
      expect(listed.status).toBe(200);
      expect((await listed.json()).data).toEqual([]);
      // Five listings, and the route's sixth.
      expect((await limitCount("tools_per_server")) - before).toBe(6);
    } finally {
      await attacker.close();
    }
  });

  it("new tools get their roles at most MCP_MAX_NEW_TOOLS_PER_LISTING per listing, in one SpiceDB write; a server has roles for at most MCP_MAX_TOOLS_PER_SERVER tools", async () => {
    const { o, id } = await register(upstream);
    upstream.toolList = Array.from({ length: 300 }, (_, i) => ({ name: `t_${i}` }));
    const later = await limitCount("new_tools_per_listing");
    const full = await limitCount("tools_per_server");
    const listing = async () => {
      const writes = await spicedbWrites();
      const { body } = await rpc(gw.url, o.secret, "alice", id, "tools/list");
      return {
        listed: ((body.result?.tools ?? []) as unknown[]).length,
        writes: (await spicedbWrites()) - writes,
      };
    };
    expect(await listing()).toEqual({ listed: 100, writes: 1 });
    expect(await listing()).toEqual({ listed: 200, writes: 1 });
    expect(await listing()).toEqual({ listed: 300, writes: 1 });
    expect(await listing()).toEqual({ listed: 300, writes: 0 });
    expect((await limitCount("new_tools_per_listing")) - later).toBe(200 + 100);

    // 300 other names: room for 100 more, then none.
    upstream.toolList = Array.from({ length: 300 }, (_, i) => ({ name: `u_${i}` }));
    expect(await listing()).toEqual({ listed: 100, writes: 1 });
    expect(await listing()).toEqual({ listed: 100, writes: 0 });
    expect((await limitCount("tools_per_server")) - full).toBe(200 + 200);
    const { data } = await (
      await caller(gw.url, o.secret)("alice", `/api/v1/mcp/servers/${id}/tools`)
    ).json();
    expect(data.filter((t: { required_role: string | null }) => t.required_role !== null)).toHaveLength(400);
  });
});

describe("tool names", () => {
  const long = "\u{1F600}".repeat(100); // 1,200 bytes encoded, past SpiceDB's 1,024
  const justOver = `${"a".repeat(383)}.`; // 386 bytes encoded
  const longest = "a".repeat(384);

  it("names over MCP_MAX_TOOL_NAME_BYTES encoded, with a control character or not well-formed are left out of the list and refused by tools/call (-32602), never a 5xx, and never reach the audit trail", async () => {
    const { o, id } = await register(upstream);
    const refused = [long, justOver, "bad\u0000name", "bell\u0007", "x\uD800y"];
    upstream.toolList = [{ name: "fine" }, { name: longest }, ...refused.map((name) => ({ name }))];
    const before = await limitCount("tool_name");
    const list = await rpc(gw.url, o.secret, "alice", id, "tools/list");
    expect(list.status).toBe(200);
    expect(((list.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name).sort()).toEqual([
      longest,
      "fine",
    ]);
    expect((await limitCount("tool_name")) - before).toBe(refused.length);
    for (const [name, why] of [
      [long, "the name takes more than 384 bytes encoded (MCP_MAX_TOOL_NAME_BYTES)"],
      [justOver, "the name takes more than 384 bytes encoded (MCP_MAX_TOOL_NAME_BYTES)"],
      ["bad\u0000name", "the name holds a control character"],
      ["x\uD800y", "the name is not well-formed Unicode"],
    ]) {
      const call = await rpc(gw.url, o.secret, "alice", id, "tools/call", { name, arguments: {} });
      expect(call.status).toBe(200);
      expect(call.body.error).toEqual({ code: -32602, message: `Invalid tool name: ${why}` });
    }
    const tools = await caller(gw.url, o.secret)("alice", `/api/v1/mcp/servers/${id}/tools`);
    expect(tools.status).toBe(200);
    expect((await tools.json()).data.map((t: { name: string }) => t.name)).toEqual([longest, "fine"].sort());
    const audit = await (await o.audit("alice", "mcp_server", id)).json();
    expect(audit.data.filter((r: { action: string }) => r.action === "call")).toEqual([]);
  });
});
