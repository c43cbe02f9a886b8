import { AUDIT_RESOURCE_TYPES, AuditLog } from "@gw/core/audit";
import { createPostgres } from "@gw/core/postgres";
import { expectJsonError } from "@gw/test-kit";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { consoleSessionCookie, consoleSignIn, useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV } from "../../../test/mcp/mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
const upstream = useFakeMcpServer();

const AUDIT = "/api/v1/admin/audit";

/** alice registers the fake upstream in a new organization, whose admin key is returned. */
async function serverRegistered() {
  const o = await newOrg(gw);
  const as = caller(gw.url, o.secret);
  const created = await as("alice", "/api/v1/mcp/servers", { json: { name: "docs", url: upstream.url } });
  expect(created.status).toBe(201);
  const { id } = await created.json();
  const admin = await gw.createKey({
    org: o.org,
    owner: "root",
    permissions: ["admin:api-keys", "admin:console"],
  });
  return { org: o.org, as, id, admin };
}

/** alice calls a tool of `name` through the proxy (refused: no such tool, audited all the same). */
async function toolCalled(name: string) {
  const { as, id, admin } = await serverRegistered();
  const called = await as("alice", `/api/v1/mcp/servers/${id}/mcp`, {
    json: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: {} } },
  });
  expect(called.status).toBe(200);
  expect((await called.json()).error.message).toBe(`Unknown tool: ${name}`);
  return { id, admin };
}

/**
 * A call of a tool of `name` in the trail, written as the proxy writes one. The proxy itself now refuses
 * a name holding a control character or broken Unicode before any record; the trail must still hold and
 * read back any text, whoever wrote it.
 */
async function callRecorded(name: string) {
  const { org, id, admin } = await serverRegistered();
  const db = createPostgres(gw.database.url, { connectionName: "test" });
  try {
    await new AuditLog(db, { retentionMs: 86_400_000 }).record(
      {
        organization: org,
        actor: { userId: "alice", keyId: admin.record.id, credential: "api_key" },
        action: "call",
        resourceType: "mcp_server",
        resourceId: id,
        tool: name,
        decision: "denied",
        requestId: "req-odd-tool-name",
      },
      "denied",
    );
  } finally {
    await db.close();
  }
  return { id, admin };
}

/** A console session of the key, signed in as a browser signs in: its cookie. */
async function consoleSession(secret: string): Promise<string> {
  const signedIn = await consoleSignIn(gw.url, secret);
  expect(signedIn.status).toBe(303);
  return consoleSessionCookie(signedIn)!;
}

describe("the organization's audit trail keeps any text and reads it back by every filter", () => {
  it.each([
    ["U+0000", "read\u0000file"],
    ["a lone high surrogate", "read\ud800file"],
    ["a lone low surrogate", "\udc00"],
    ["\\u0000 as written", "read\\u0000file"],
  ])(
    "a call of a tool whose name holds %s: recorded as sent, and listed by actor, action and resource, on the API and the console",
    async (_what, name) => {
      const { id, admin } = await callRecorded(name);
      const queries = [
        "",
        "actor=alice",
        "action=call",
        "resourceType=mcp_server",
        `resourceType=mcp_server&resourceId=${id}`,
        `actor=alice&action=call&resourceType=mcp_server&resourceId=${id}`,
      ];
      for (const query of queries) {
        const res = await gw.call(`${AUDIT}?${query}`, { bearer: admin.secret });
        expect(res.status, query).toBe(200);
        const calls = (await res.json()).data.filter((r: { action: string }) => r.action === "call");
        expect(calls, query).toEqual([
          expect.objectContaining({
            action: "call",
            actor: expect.objectContaining({ userId: "alice" }),
            resourceType: "mcp_server",
            resourceId: id,
            tool: name,
            decision: "denied",
            outcome: "denied",
          }),
        ]);
      }
      // Filters that match nothing answer an empty page, not an error.
      for (const query of ["actor=bob", "action=grant", "resourceType=mcp_server&resourceId=mcp_other"]) {
        const res = await gw.call(`${AUDIT}?${query}`, { bearer: admin.secret });
        expect(res.status, query).toBe(200);
        expect(
          (await res.json()).data.filter((r: { action: string }) => r.action === "call"),
          query,
        ).toEqual([]);
      }
      // The console's audit page reads the same route as the session's key.
      const cookie = await consoleSession(admin.secret);
      const page = await fetch(`${gw.url}/admin/api/v1/admin/audit?actor=alice&action=call&limit=25`, {
        headers: { Cookie: cookie },
      });
      expect(page.status).toBe(200);
      expect((await page.json()).data.map((r: { tool?: string }) => r.tool)).toEqual([name]);
    },
  );
});

describe("the audit trail's filters are validated", () => {
  it("resourceId without resourceType: 422 at resourceId, never a filter silently dropped", async () => {
    const { id, admin } = await toolCalled("search_docs");
    const res = await gw.call(`${AUDIT}?resourceId=${id}`, { bearer: admin.secret });
    expect((await expectJsonError(res, 422)).detail).toEqual([
      {
        loc: ["query", "resourceId"],
        msg: "Value error, resourceId needs resourceType: an id names a resource only with its type",
        type: "value_error",
        input: id,
      },
    ]);
  });

  it.each([
    ["actor", "alice%00"],
    ["resourceId", "mcp_%00"],
    ["actor", "%ED%A0%80"],
  ])("%s=%s (U+0000, or bytes that are not UTF-8): 422 at that filter", async (filter, value) => {
    const { admin } = await toolCalled("search_docs");
    const res = await gw.call(`${AUDIT}?resourceType=mcp_server&${filter}=${value}`, {
      bearer: admin.secret,
    });
    const { detail } = await expectJsonError(res, 422);
    expect((detail as { loc: string[] }[]).map((d) => d.loc)).toEqual([["query", filter]]);
  });
});

describe("the audit trail's instants and cursor are refused as the other routes refuse them", () => {
  it.each([
    ["since", "yesterday"],
    ["until", "2027-01-01"],
    ["since", "2030-02-30T00:00:00Z"],
  ])("%s=%s: 422 datetime_parsing", async (param, value) => {
    const { admin } = await serverRegistered();
    const res = await gw.call(`${AUDIT}?${param}=${value}`, { bearer: admin.secret });
    expect((await expectJsonError(res, 422)).detail).toEqual([
      expect.objectContaining({ loc: ["query", param], type: "datetime_parsing", input: value }),
    ]);
  });

  it("cursor=abc: 422 value_error saying so, as a lookup's cursor", async () => {
    const { admin } = await serverRegistered();
    const res = await gw.call(`${AUDIT}?cursor=abc`, { bearer: admin.secret });
    expect((await expectJsonError(res, 422)).detail).toEqual([
      { loc: ["query", "cursor"], msg: "Value error, invalid cursor", type: "value_error", input: "abc" },
    ]);
  });
});

describe("the audit trail is filtered by every resource type it writes", () => {
  it.each(["alice", "end user 42@example.com"])(
    "act_as_key_owner records (resourceType user) are listed by resourceType=user&resourceId=%s",
    async (user) => {
      const { org, admin } = await serverRegistered();
      const db = createPostgres(gw.database.url, { connectionName: "test" });
      try {
        await new AuditLog(db, { retentionMs: 86_400_000 }).record(
          {
            organization: org,
            actor: { userId: user, keyId: admin.record.id, credential: "api_key" },
            action: "act_as_key_owner",
            resourceType: "user",
            resourceId: user,
            request: "GET /api/v1/authentication/whoami",
            requestId: "req-act-as-owner",
          },
          "allowed",
        );
      } finally {
        await db.close();
      }
      for (const query of [
        "resourceType=user",
        `resourceType=user&resourceId=${encodeURIComponent(user)}`,
        "action=act_as_key_owner",
      ]) {
        const res = await gw.call(`${AUDIT}?${query}`, { bearer: admin.secret });
        expect(res.status, query).toBe(200);
        expect((await res.json()).data, query).toEqual([
          expect.objectContaining({ action: "act_as_key_owner", resourceType: "user", resourceId: user }),
        ]);
      }
    },
  );

  it.each(AUDIT_RESOURCE_TYPES)("resourceType=%s is a filter (200), not a 422", async (type) => {
    const { admin } = await serverRegistered();
    const res = await gw.call(`${AUDIT}?resourceType=${type}&resourceId=x`, { bearer: admin.secret });
    expect(res.status).toBe(200);
  });
});
