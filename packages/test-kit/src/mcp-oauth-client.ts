import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";

/** An in-memory OAuth client as an MCP host keeps one: what it registered, its tokens, its PKCE verifier. */
export class MemoryProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  authorizationUrl: URL | undefined;
  /** A Client ID Metadata Document's URL: presented instead of registering, where the server supports it. */
  clientMetadataUrl: string | undefined;
  readonly name: string;
  private readonly redirect: string | (() => string);
  /** `redirect`: a function when it is known only once the host listens. */
  constructor(redirect: string | (() => string), clientMetadataUrl?: string, name = "Test MCP host") {
    this.redirect = redirect;
    this.clientMetadataUrl = clientMetadataUrl;
    this.name = name;
  }
  get redirectUrl() {
    return typeof this.redirect === "string" ? this.redirect : this.redirect();
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUrl],
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
