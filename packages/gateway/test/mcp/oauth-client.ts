import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
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

/** An in-memory OAuth client as an MCP host keeps one: what it registered, its tokens, its PKCE verifier. */
export class MemoryProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  authorizationUrl: URL | undefined;
  /** A Client ID Metadata Document's URL: presented instead of registering, where the server supports it. */
  clientMetadataUrl: string | undefined;
  private readonly redirect: string;
  constructor(redirect: string, clientMetadataUrl?: string) {
    this.redirect = redirect;
    this.clientMetadataUrl = clientMetadataUrl;
  }
  get redirectUrl() {
    return this.redirect;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "Test MCP host",
      redirect_uris: [this.redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** The value of a page's hidden form field `name`. */
export const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1]?.replaceAll("&amp;", "&");
