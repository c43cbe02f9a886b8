export { MemoryProvider } from "@gw/test-kit/mcp-oauth-client";

import { TEST_PUBLIC_URL } from "../harness.ts";

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
