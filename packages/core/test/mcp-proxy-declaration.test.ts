import { describe, expect, it } from "vitest";
import {
  MCP_PROXY_ROUTE,
  mcpProxyPath,
  mcpProxyUrl,
  PROTOCOL_VERSIONS,
  serverOfProxyUrl,
} from "../src/mcp/index.ts";

const ID = "mcp_0123456789abcdef01234567";
const BASE = "https://gw.example.com";

describe("the MCP proxy's declaration", () => {
  it("builds a server's proxy path and URL from the one route", () => {
    expect(MCP_PROXY_ROUTE).toBe("/api/v1/mcp/servers/:id/mcp");
    expect(mcpProxyPath(ID)).toBe(MCP_PROXY_ROUTE.replace(":id", ID));
    expect(mcpProxyUrl(BASE, ID)).toBe(`${BASE}/api/v1/mcp/servers/${ID}/mcp`);
  });

  it("reads the server back from exactly its proxy URL under the base, and from nothing else", () => {
    expect(serverOfProxyUrl(BASE, mcpProxyUrl(BASE, ID))).toBe(ID);
    expect(serverOfProxyUrl("", mcpProxyPath(ID))).toBe(ID);
    for (const other of [
      mcpProxyUrl("https://evil.example.com", ID),
      `${mcpProxyUrl(BASE, ID)}/`,
      `${mcpProxyUrl(BASE, ID)}?x=1`,
      mcpProxyUrl(BASE, "mcp_0123"),
      mcpProxyUrl(BASE, `${ID}/../mcp_0123456789abcdef01234567`),
      `${BASE}/api/v1/mcp/servers/${ID}/tools`,
    ])
      expect(serverOfProxyUrl(BASE, other), other).toBeUndefined();
  });

  it("speaks the versions of both eras, newest first", () => {
    expect(PROTOCOL_VERSIONS).toEqual(["2026-07-28", "2025-11-25", "2025-06-18"]);
  });
});
