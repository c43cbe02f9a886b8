import { jwks, oauthAuthorizationServer, openIdConfiguration } from "./jwks.ts";
import { protectedResourceMetadata } from "./oauth-protected-resource.ts";
import { openApiDocument } from "./openapi.ts";

/** Public documents at fixed addresses (no credential): registered at the root, beside the probes. */
export const wellKnownRoutes = [
  jwks,
  openIdConfiguration,
  oauthAuthorizationServer,
  openApiDocument,
  protectedResourceMetadata,
];
