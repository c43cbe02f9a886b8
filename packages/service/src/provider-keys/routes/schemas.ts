import { objectSchema, stringSchema } from "@gw/core/openapi";
import { z } from "zod";
import { nullable, unixTime } from "../../http/schemas.ts";
import { BYOK_PROVIDERS } from "../../llm/provider-keys.ts";
import type { ProviderKeyStore } from "../store.ts";

export const TAG = "Provider keys";

/** What the provider key routes need. */
export interface ProviderKeyRouteDeps {
  providerKeys: ProviderKeyStore;
}

/** `{provider}` in a path: a provider kind an organization may store its key for. */
export const providerParams = z.object({ provider: z.enum(BYOK_PROVIDERS) });

/** An organization's key as every answer shows it: never the key. */
export const providerKeySchema = objectSchema({
  object: { type: "string", const: "provider.credential" },
  provider: { enum: [...BYOK_PROVIDERS] },
  api_key_last4: stringSchema("The key's last four characters; the key itself is never shown"),
  base_url: {
    ...nullable("string"),
    description: "Where the key is sent instead of the deployment's base_url",
  },
  created_at: unixTime,
  updated_at: { ...unixTime, description: "When it was last stored (Unix seconds)" },
  first_used_at: {
    ...nullable("integer"),
    description: "The first model call made with the key as last stored (Unix seconds); null until then",
  },
});

export const providerKeyListSchema = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: providerKeySchema },
});
