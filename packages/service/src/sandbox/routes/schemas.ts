import { objectSchema, stringSchema } from "@gw/core/openapi";
import { unixTime } from "../../http/schemas.ts";
import type { Sandbox } from "../sandbox.ts";

/** What the sandbox routes need. */
export interface SandboxRouteDeps {
  sandbox: Sandbox;
}

export const TAG = "Sessions";

/**
 * Branch names are checked by `git check-ref-format` when a request comes;
 * the document needs only the schemas' shape, which does not depend on git.
 */
export const anyBranchName = { isValidBranchName: async () => true };

export const session = objectSchema({
  id: stringSchema(),
  object: { type: "string", const: "sandbox.session" },
  owner: stringSchema(),
  repository: stringSchema(),
  repository_id: { type: "integer" },
  assignment_generation: { type: "integer" },
  created_at: unixTime,
});

/** `GitHubPushResult`: every field required. */
export const pushResult = objectSchema({
  session_id: stringSchema(),
  assignment_generation: { type: "integer" },
  repository_id: { type: "integer" },
  owner: stringSchema(),
  repository: stringSchema(),
  branch: stringSchema(),
  remote_head_sha: stringSchema(),
  no_changes: { type: "boolean" },
});
