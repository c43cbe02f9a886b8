import { TOKEN_LEASES_KEY } from "@gw/core/authz";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV, mcpClient, startReplica } from "../../../test/mcp/mcp-helpers.ts";
import type { RunningGateway } from "../../server.ts";

/** Both gateways trust what Redis says a moment after they connect, so replica B soon answers from its lease. */
const ENV = { ...MCP_ENV, SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: "100" };
const gw = useGateway(ENV);
let upstream: FakeMcpServer;
let replica: RunningGateway;
/** Replica B holds a told write here while `held` is set: it says it arrived, and waits to be released. */
let held: { arrived: PromiseWithResolvers<void>; released: PromiseWithResolvers<void> } | undefined;

beforeAll(async () => {
  upstream = await startFakeMcpServer();
  replica = await startReplica(gw, ENV, undefined, {
    tokenLeaseHooks: {
      beforeApply: async () => {
        if (!held) return;
        held.arrived.resolve();
        await held.released.promise;
      },
    },
  });
});
afterAll(async () => {
  await replica?.close();
  await upstream?.close();
});

describe("the MCP proxy on two gateways holding leases on servers' tokens (MCP_TOKEN_LEASE_MS)", () => {
  it("a revoke on gateway A answers only once replica B has applied it, and B's next call is refused", async () => {
    const leaseHeld = async (g: { metricsUrl: string }) =>
      /^gateway_mcp_token_lease_held (\d)/m.exec(await (await fetch(g.metricsUrl)).text())?.[1];
    expect(await leaseHeld(replica)).toBe("1");
    expect(await leaseHeld(gw)).toBe("1");
    const o = await newOrg(gw);
    const created = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
      json: { name: "docs", url: upstream.url },
    });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    const grant = { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" };
    expect((await o.grant("alice", grant)).status).toBe(204);
    const bob = await mcpClient(replica.url, id, o.secret, "bob");
    const call = () => bob.callTool({ name: "read_file", arguments: { path: "/plan" } });
    expect(await call()).toMatchObject({ content: [{ text: "contents of /plan" }] });

    const hold = { arrived: Promise.withResolvers<void>(), released: Promise.withResolvers<void>() };
    held = hold;
    let answered = false;
    const revoke = o.revoke("alice", grant).then((res) => {
      answered = true;
      return res;
    });
    await hold.arrived.promise;
    expect(answered).toBe(false);
    held = undefined;
    hold.released.resolve();
    expect((await revoke).status).toBe(204);
    const refused = await call().catch((e: Error & { code?: number }) => e);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as { code?: number }).code).toBe(404);
    await bob.close();
  });

  it("a gateway with MCP_TOKEN_LEASE_MS=0 holds no lease and says so in its metrics; it still registers servers", async () => {
    const holders = () => gw.redis.zcard(TOKEN_LEASES_KEY);
    const before = await holders();
    const off = await startReplica(gw, { ...ENV, MCP_TOKEN_LEASE_MS: "0" });
    try {
      expect(await holders()).toBe(before);
      expect(
        /^gateway_mcp_token_lease_held (\d)/m.exec(await (await fetch(off.metricsUrl)).text())?.[1],
      ).toBe("0");
      const o = await newOrg(gw);
      const created = await caller(off.url, o.secret)("alice", "/api/v1/mcp/servers", {
        json: { name: "docs", url: upstream.url },
      });
      expect(created.status).toBe(201);
    } finally {
      await off.close();
    }
  });
});
