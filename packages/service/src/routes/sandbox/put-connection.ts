import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { ConnectionStore } from "../../sandbox/connections.ts";

// The token travels to git in an environment variable and one askpass line: printable, no spaces.
export const putConnectionBody = z.strictObject({
  token: z
    .string()
    .min(1)
    .max(4096)
    .regex(/^[\x21-\x7e]*$/, "String should contain only printable characters without spaces"),
});

/** `PUT /api/v1/sandbox/connections/github` `{token}` → 204: stores (replaces) the principal's credential, encrypted. */
export function registerPutConnection(router: Router, connections: ConnectionStore): void {
  router.put("/sandbox/connections/github", requirePermission("sandbox:write"), async (req, res) => {
    const { token } = validate("body", putConnectionBody, req.body);
    await connections.put(principalOf(res), token);
    res.status(204).end();
  });
}
