import { createServer, type Server } from "node:net";
import { blockedAddress, UpstreamClients, UpstreamError, UpstreamPolicy } from "@gw/core/mcp";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningGateway } from "../../src/server.ts";
import { newOrg } from "../authorization-helpers.ts";
import { useGateway } from "../harness.ts";
import { caller, rpc, startReplica, VAULT_KEYS } from "./mcp-helpers.ts";

const LIMITS = { maxAnswerBytes: 1 << 20, maxTools: 100 };

// Refuses private upstreams, as a gateway does by default.
const gw = useGateway({ VAULT_KEYS });

describe("registering an MCP server: no SSRF", () => {
  it.each([
    ["http://example.com/mcp", /must be https/],
    ["ftp://example.com/mcp", /must be http\(s\)/],
    ["file:///etc/passwd", /must be http\(s\)/],
    ["https://127.0.0.1/mcp", /127\.0\.0\.1/],
    ["https://169.254.169.254/latest/meta-data", /169\.254\.169\.254/],
    ["https://localhost/mcp", /resolves to (127\.0\.0\.1|::1)/],
    ["https://[::1]/mcp", /::1/],
    ["https://[::ffff:127.0.0.1]/mcp", /127\.0\.0\.1/],
    // The URL parser rewrites these to ::7f00:1, ::ffff:0:7f00:1 and 127.0.0.1: the address is what is judged.
    ["https://[::127.0.0.1]/mcp", /127\.0\.0\.1/],
    ["https://[::ffff:0:127.0.0.1]/mcp", /127\.0\.0\.1/],
    ["https://0x7f000001/mcp", /127\.0\.0\.1/],
    ["https://[::ffff:a9fe:a9fe]/latest/meta-data", /169\.254\.169\.254/],
    ["https://10.0.0.8/mcp", /10\.0\.0\.8/],
    ["https://192.168.1.1/mcp", /192\.168\.1\.1/],
    ["https://user:pw@example.com/mcp", /must not carry credentials/],
    ["not a url", /not a valid URL/],
  ])("%s is refused: 422 at body.url saying why", async (url, why) => {
    const o = await newOrg(gw);
    const res = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", { json: { name: "x", url } });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.detail).toHaveLength(1);
    expect(body.detail[0]).toMatchObject({ loc: ["body", "url"], type: "value_error" });
    expect(body.detail[0].msg).toMatch(why);
    // Nothing was registered.
    const list = await (await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers")).json();
    expect(list.data).toEqual([]);
  });

  it("a change of URL is checked the same way", async () => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    // A public address, checked without connecting to it.
    const created = await as("alice", "/api/v1/mcp/servers", {
      json: { name: "x", url: "https://1.1.1.1/mcp" },
    });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    const patched = await as("alice", `/api/v1/mcp/servers/${id}`, {
      method: "PATCH",
      json: { url: "https://169.254.169.254/" },
    });
    expect(patched.status).toBe(422);
    expect((await (await as("alice", `/api/v1/mcp/servers/${id}`)).json()).url).toBe("https://1.1.1.1/mcp");
  });
});

describe("the upstream policy on every connection", () => {
  let upstream: FakeMcpServer;
  beforeAll(async () => {
    upstream = await startFakeMcpServer();
  });
  afterAll(() => upstream?.close());

  it("classifies addresses: loopback, private, link-local, metadata and mapped forms are refused, public ones pass", () => {
    for (const blocked of [
      "127.0.0.1",
      "10.1.1.1",
      "172.16.0.1",
      "192.168.0.1",
      "169.254.169.254",
      "0.0.0.0",
      "100.64.0.1",
      "::1",
      "fe80::1",
      "fd00:ec2::254",
      "::ffff:10.0.0.1",
      "::ffff:7f00:1",
      // IPv4-compatible and IPv4-translated forms, dotted or in hex.
      "::127.0.0.1",
      "::7f00:1",
      "::ffff:0:127.0.0.1",
      "::ffff:0:7f00:1",
      "::a9fe:a9fe",
      "0:0:0:0:0:ffff:0a00:0001",
      "fe80::1%eth0",
    ])
      expect(blockedAddress(blocked), blocked).toBeDefined();
    for (const open of [
      "1.1.1.1",
      "93.184.216.34",
      "2606:4700:4700::1111",
      "::ffff:101:101",
      "::ffff:0:101:101",
    ])
      expect(blockedAddress(open), open).toBeUndefined();
  });

  it("a name that resolves to a public address at registration and to 127.0.0.1 later (DNS rebinding) is refused when the connection is made, and nothing reaches that address", async () => {
    let answer = "93.184.216.34";
    const policy = new UpstreamPolicy({
      allowPrivate: false,
      resolver: async () => [{ address: answer, family: 4 }],
    });
    await expect(policy.check("https://rebind.test/mcp")).resolves.toBeInstanceOf(URL);
    answer = "127.0.0.1";
    await expect(policy.check("https://rebind.test/mcp")).rejects.toThrow(/127\.0\.0\.1/);
    const clients = new UpstreamClients({ policy, timeoutMs: 1_500, ...LIMITS });
    const before = upstream.requests.length;
    const failed = await clients
      .listTools(
        { org: "o", user: "u" },
        { id: "mcp_1", name: "rebind", url: `https://rebind.test:${upstream.port}/mcp` },
        {},
      )
      .catch((e) => e);
    expect(failed).toBeInstanceOf(UpstreamError);
    expect(failed.message).toMatch(/MCP server 'rebind' \(mcp_1\) was refused: .*127\.0\.0\.1/);
    expect(upstream.requests.length).toBe(before);
    await clients.close();
  });

  it("a connection goes to the address that was checked (the resolver's), not to what the system would resolve", async () => {
    const policy = new UpstreamPolicy({
      allowPrivate: true,
      resolver: async () => [{ address: "127.0.0.1", family: 4 }],
    });
    const clients = new UpstreamClients({ policy, timeoutMs: 1_500, ...LIMITS });
    const tools = await clients.listTools(
      { org: "o", user: "u" },
      { id: "mcp_2", name: "pinned", url: `http://pinned.invalid:${upstream.port}/mcp` },
      {},
    );
    expect(tools.map((t) => t.name)).toContain("search");
    await clients.close();
  });
});

describe("a server stored while private upstreams were allowed, on a gateway where they are not", () => {
  // A replica that allows them (as a development setting would) shares the gateway's database, so what
  // the replica stored is what the gateway finds.
  let upstream: FakeMcpServer;
  let lenient: RunningGateway;
  let listener: Server;
  let connections = 0;
  beforeAll(async () => {
    upstream = await startFakeMcpServer();
    lenient = await startReplica(gw);
    listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await lenient?.close();
    await upstream?.close();
    await new Promise((resolve) => listener?.close(resolve));
  });

  it.each([
    ["http://127.0.0.1:PORT/mcp"],
    ["http://[::ffff:7f00:1]:PORT/mcp"],
    ["http://0x7f000001:PORT/mcp"],
  ])("%s is not called: the https rule holds at every connection, IP literal or name", async (form) => {
    const o = await newOrg(gw);
    const url = form.replace("PORT", String(upstream.port));
    const created = await caller(lenient.url, o.secret)("alice", "/api/v1/mcp/servers", {
      json: { name: "old", url },
    });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    // Where it is allowed, the stored URL reaches the upstream.
    const allowed = await rpc(lenient.url, o.secret, "alice", id, "tools/list");
    expect(((allowed.body.result?.tools ?? []) as unknown[]).length).toBeGreaterThan(0);
    const before = upstream.requests.length;
    const refused = await rpc(gw.url, o.secret, "alice", id, "tools/list");
    expect(refused.status).toBe(200);
    expect(refused.body.error?.message).toBe(
      `MCP server 'old' (${id}) was refused: the URL must be https (MCP_ALLOW_PRIVATE_UPSTREAMS is off)`,
    );
    const call = await rpc(gw.url, o.secret, "alice", id, "tools/call", { name: "search", arguments: {} });
    expect(call.body.error?.message).toMatch(/was refused: the URL must be https/);
    expect(upstream.requests.length).toBe(before);
  });

  it.each([
    ["https://127.0.0.1:PORT/mcp", /127\.0\.0\.1/],
    ["https://[::ffff:7f00:1]:PORT/mcp", /::ffff:7f00:1 \(127\.0\.0\.1\)/],
    ["https://[::7f00:1]:PORT/mcp", /::7f00:1 \(127\.0\.0\.1\)/],
  ])(
    "%s (https, an IP literal) is refused by the address check when the connection is made: no connection reaches it",
    async (form, why) => {
      const policy = new UpstreamPolicy({ allowPrivate: false });
      const clients = new UpstreamClients({ policy, timeoutMs: 1_500, ...LIMITS });
      const before = connections;
      const port = (listener.address() as { port: number }).port;
      const failed = await clients
        .listTools(
          { org: "o", user: "u" },
          { id: "mcp_3", name: "literal", url: form.replace("PORT", String(port)) },
          {},
        )
        .catch((e) => e);
      await clients.close();
      expect(failed).toBeInstanceOf(UpstreamError);
      expect(failed.message).toMatch(/^MCP server 'literal' \(mcp_3\) was refused: it resolves to /);
      expect(failed.message).toMatch(why);
      expect(connections).toBe(before);
    },
  );
});
