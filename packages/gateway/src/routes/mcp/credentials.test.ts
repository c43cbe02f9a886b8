import { expectJsonError } from "@gw/test-kit";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV } from "../../../test/mcp/mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
const upstream = useFakeMcpServer();

/** What a caller meant to store: it must never come back in an answer. */
const SECRET = "sk-live-3b8f0c2d9e";

describe("PUT /api/v1/mcp/servers/{id}/credentials/{scope}: a refused credential is never echoed", () => {
  it.each([
    [
      "a token with a line break",
      { type: "bearer", token: `${SECRET}\n` },
      ["body.token:string_pattern_mismatch"],
    ],
    [
      "a token over 8192 characters",
      { type: "bearer", token: SECRET.repeat(1000) },
      ["body.token:string_too_long"],
    ],
    [
      "a header value with U+0000",
      { type: "header", name: "X-Api-Key", value: `${SECRET}\u0000` },
      ["body.value:string_pattern_mismatch"],
    ],
    [
      "a header value that is a list",
      { type: "header", name: "X-Api-Key", value: [SECRET] },
      ["body.value:string_type"],
    ],
    [
      "a misspelt token",
      { type: "bearer", tokn: SECRET },
      ["body.token:missing", "body.tokn:extra_forbidden"],
    ],
    ["an unknown type", { type: "basic", token: SECRET }, ["body.type:value_error"]],
    ["no type", { token: SECRET }, ["body.type:value_error"]],
    ["a reserved header name", { type: "header", name: "Cookie", value: SECRET }, ["body.name:value_error"]],
  ])("%s: 422 at its field, without the secret", async (_what, json, expected) => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    const created = await as("alice", "/api/v1/mcp/servers", { json: { name: "docs", url: upstream.url } });
    const { id } = await created.json();
    for (const scope of ["me", "shared"]) {
      const res = await as("alice", `/api/v1/mcp/servers/${id}/credentials/${scope}`, {
        method: "PUT",
        json,
      });
      const body = await expectJsonError(res, 422);
      const detail = body.detail as { loc: string[]; type: string; input?: unknown }[];
      expect(detail.map((d) => `${d.loc.join(".")}:${d.type}`).sort(), scope).toEqual(expected);
      expect(JSON.stringify(body), scope).not.toContain(SECRET);
    }
    // What is not a secret is still echoed: the header's name.
    if (expected[0] === "body.name:value_error") {
      const res = await as("alice", `/api/v1/mcp/servers/${id}/credentials/me`, { method: "PUT", json });
      expect(((await res.json()).detail as { input?: unknown }[])[0]!.input).toBe("Cookie");
    }
  });
});
