export { MemoryProvider } from "@gw/test-kit/mcp-oauth-client";

import { expect } from "vitest";
import { newOrg, type Org } from "../authorization-helpers.ts";
import { type GatewayHarness, TEST_PUBLIC_URL } from "../harness.ts";
import { caller } from "./mcp-helpers.ts";

/** A fresh organization where alice registered `upstreamUrl` as the server "docs" and `reader` reads it. */
export async function docsServer(
  gw: GatewayHarness,
  upstreamUrl: string,
  reader: string,
): Promise<{ o: Org; id: string }> {
  const o = await newOrg(gw);
  const res = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
    json: { name: "docs", url: upstreamUrl, description: "The document store" },
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  expect(
    (await o.grant("alice", { resourceType: "mcp_server", resourceId: id, userId: reader, role: "reader" }))
      .status,
  ).toBe(204);
  return { o, id };
}

/**
 * The client's network: requests to the gateway's public URL (https://gateway.test) reach the test
 * gateway process `gatewayUrl()` names (one replica or another); others go where they say.
 */
export const clientFetchTo =
  (gatewayUrl: () => string) => (input: string | URL | Request, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    const local = url.startsWith(TEST_PUBLIC_URL)
      ? `${gatewayUrl()}${url.slice(TEST_PUBLIC_URL.length)}`
      : url;
    return input instanceof Request ? fetch(new Request(local, input), init) : fetch(local, init);
  };

/** The value of a page's hidden form field `name`. */
export const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1]?.replaceAll("&amp;", "&");
