import type { Router } from "express";
import { SIGNING_ALGORITHMS } from "../../tokens/signing-keys.ts";
import type { TokenService } from "../../tokens/tokens.ts";

/**
 * `GET /.well-known/jwks.json` and `GET /.well-known/openid-configuration`:
 * public and cacheable, so any audience can verify gateway tokens with a
 * stock library (`jose.createRemoteJWKSet`).
 */
export function registerWellKnown(router: Router, tokens: TokenService): void {
  router.get("/.well-known/jwks.json", (_req, res) => {
    res.set("Cache-Control", "public, max-age=300");
    res.json({ keys: tokens.publicJwks });
  });
  router.get("/.well-known/openid-configuration", (_req, res) => {
    res.set("Cache-Control", "public, max-age=300");
    res.json({
      issuer: tokens.issuer,
      jwks_uri: `${tokens.issuer}/.well-known/jwks.json`,
      token_endpoint: `${tokens.issuer}/api/v1/authentication/api-keys/exchange-token`,
      id_token_signing_alg_values_supported: [...SIGNING_ALGORITHMS],
      token_endpoint_auth_methods_supported: ["bearer"],
      subject_types_supported: ["public"],
      claims_supported: ["iss", "sub", "aud", "iat", "nbf", "exp", "jti", "org", "key_id", "permissions"],
    });
  });
}
