import type { ResourceAuthorization, Role } from "@gw/core/authz";
import { ValidationFailed } from "@gw/core/errors";
import { roleOn } from "../../http/roles.ts";
import type { VectorStores } from "../vector-stores.ts";

/** What the vector store routes need. */
export interface VectorStoreRouteDeps {
  vectorStores: VectorStores;
  authorization: ResourceAuthorization;
}

export const TAG = "Vector stores";

/** The principal's `role` on the vector store of the path's `id`. */
export const storeRole = (role: Role) => roleOn("vector_store", role);

/** 422 for an `after` or `before` that is not an id of the list. */
export const unknownCursor = (query: { after?: string | undefined; before?: string | undefined }) =>
  new ValidationFailed([
    {
      loc: ["query", query.after !== undefined ? "after" : "before"],
      msg: "No item with this id in the list",
      type: "value_error",
      input: query.after ?? query.before,
    },
  ]);

/** 422 for a list asked for both `after` and `before`. */
export function oneCursor(query: { after?: string | undefined; before?: string | undefined }): void {
  if (query.after !== undefined && query.before !== undefined)
    throw new ValidationFailed([
      {
        loc: ["query", "before"],
        msg: "Give after or before, not both",
        type: "value_error",
        input: query.before,
      },
    ]);
}
