import { describe, expect, it } from "vitest";
import { useGateway } from "../test/harness.ts";
import { MCP_ENV } from "../test/mcp/mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
const SERVER_PATH = "/api/v1/mcp/servers/mcp_0123456789abcdef01234567/mcp";
const preflight = (path: string, method = "POST") =>
  fetch(`${gw.url}${path}`, {
    method: "OPTIONS",
    headers: {
      Origin: "http://127.0.0.1:6274",
      "Access-Control-Request-Method": method,
      "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    },
  });

describe("cross-origin access for browser-based MCP clients", () => {
  it("discovery, registration, token, revocation and the MCP proxy answer a preflight from any origin, without credentials", async () => {
    for (const [path, method] of [
      [SERVER_PATH, "POST"],
      [`/.well-known/oauth-protected-resource${SERVER_PATH}`, "GET"],
      ["/.well-known/oauth-authorization-server", "GET"],
      ["/.well-known/openid-configuration", "GET"],
      ["/.well-known/jwks.json", "GET"],
      ["/oauth/register", "POST"],
      ["/oauth/token", "POST"],
      ["/oauth/revoke", "POST"],
    ] as const) {
      const res = await preflight(path, method);
      expect(res.status, path).toBe(204);
      expect(res.headers.get("access-control-allow-origin"), path).toBe("*");
      expect(res.headers.get("access-control-allow-methods"), path).toContain(method);
      expect(res.headers.get("access-control-allow-headers"), path).toMatch(
        /Authorization.*MCP-Protocol-Version/,
      );
      expect(res.headers.get("access-control-allow-credentials"), path).toBeNull();
    }
  });

  it("a refusal says where to sign in, readable by the page: WWW-Authenticate is exposed", async () => {
    const res = await fetch(`${gw.url}${SERVER_PATH}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")).toContain("WWW-Authenticate");
    expect(res.headers.get("www-authenticate")).toContain("resource_metadata=");
  });

  it("the API, the console and the sign-in page answer no other origin", async () => {
    for (const path of [
      "/api/v1/authentication/whoami",
      "/api/v1/llm/responses",
      "/admin/",
      "/oauth/authorize",
    ]) {
      const res = await preflight(path, "GET");
      expect(res.headers.get("access-control-allow-origin"), path).toBeNull();
      const plain = await fetch(`${gw.url}${path}`, { headers: { Origin: "http://127.0.0.1:6274" } });
      expect(plain.headers.get("access-control-allow-origin"), path).toBeNull();
    }
  });
});
