import { defineRoute } from "@gw/core/http";
import { secretField } from "@gw/core/validation";
import { z } from "zod";
import { noContent } from "../../http/schemas.ts";
import { type SandboxRouteDeps, TAG } from "./schemas.ts";

// The token travels to git in an environment variable and one askpass line: printable, no spaces.
export const putConnectionBody = z.strictObject({
  token: secretField(
    z
      .string()
      .min(1)
      .max(4096)
      .regex(/^[\x21-\x7e]*$/, "String should contain only printable characters without spaces"),
  ),
});

/** `PUT /api/v1/sandbox/connections/github` `{token}` → 204: stores (replaces) the principal's credential, encrypted. */
export const putConnection = defineRoute({
  method: "PUT",
  path: "/api/v1/sandbox/connections/github",
  operationId: "putGitHubConnection",
  summary: "Store (replace) the principal's GitHub credential, encrypted",
  tag: TAG,
  permission: "sandbox:write",
  body: putConnectionBody,
  responses: noContent,
  handler: async ({ principal, body, res }, deps: SandboxRouteDeps) => {
    await deps.sandbox.connections.put(principal, body.token);
    res.status(204).end();
  },
});
