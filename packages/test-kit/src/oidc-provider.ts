import { createSign, generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";

export interface TestOidcProvider {
  /** `http://127.0.0.1:<port>`: the issuer, where its discovery document is. */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** An ID token signed with the provider's own key, with whatever claims a test needs (a refused one). */
  signIdToken(claims: Record<string, unknown>): string;
  close(): Promise<void>;
}

/**
 * A real OpenID Connect provider (oidc-provider, panva) on a free loopback
 * port: one confidential client (client_secret_basic, PKCE) that may return
 * to `redirectUri`, and the package's development interactions, where any
 * login with any password signs in as the user of that name (its `sub`).
 * A test's browser submits the login form and the consent form it shows.
 */
export async function startOidcProvider(options: { redirectUri: string }): Promise<TestOidcProvider> {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const kid = randomBytes(8).toString("hex");
  const jwk = { ...privateKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" };
  const clientId = `gateway-${randomBytes(4).toString("hex")}`;
  const clientSecret = randomBytes(24).toString("base64url");

  let handle: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(16).toString("hex")] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id }) }),
  });
  // Quiet: the package warns about its development defaults on every start.
  provider.on("server_error", () => undefined);
  handle = provider.callback();

  const signIdToken = (claims: Record<string, unknown>) => {
    const now = Math.floor(Date.now() / 1000);
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const input = `${encode({ alg: "RS256", typ: "JWT", kid })}.${encode({ iss: issuer, aud: clientId, iat: now, exp: now + 300, ...claims })}`;
    const signature = createSign("RSA-SHA256").update(input).sign(privateKey).toString("base64url");
    return `${input}.${signature}`;
  };

  return {
    issuer,
    clientId,
    clientSecret,
    signIdToken,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
