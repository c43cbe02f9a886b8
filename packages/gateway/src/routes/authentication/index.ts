import { exchangeToken } from "./exchange-token.ts";
import { whoami } from "./whoami.ts";

/** The `/api/v1/authentication` routes: who a credential is, and tokens for end users. */
export const authenticationRoutes = [whoami, exchangeToken];
