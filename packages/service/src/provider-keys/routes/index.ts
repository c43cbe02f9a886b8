import { deleteProviderKey } from "./delete-provider-key.ts";
import { listProviderKeys } from "./list-provider-keys.ts";
import { putProviderKey } from "./put-provider-key.ts";

/** Organizations' own provider keys (docs/api/providers-byok.md). */
export const providerKeyRoutes = [putProviderKey, listProviderKeys, deleteProviderKey];
