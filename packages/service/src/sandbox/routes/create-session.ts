import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import type { Git } from "../git.ts";
import type { Session } from "../sessions.ts";
import { branchName } from "./branch-name.ts";
import { clientSignal } from "./client-signal.ts";
import { anyBranchName, type SandboxRouteDeps, session, TAG } from "./schemas.ts";

export type { Session };

/** Names as GitHub spells them; they become path segments of the clone URL, so nothing else passes. */
export const createSessionBody = (git: Pick<Git, "isValidBranchName">) =>
  z.strictObject({
    owner: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]*$'"),
    repository: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9_.-]+$/, "String should match pattern '^[A-Za-z0-9_.-]+$'")
      .refine((name) => name !== "." && name !== "..", { message: "Value error, not a repository name" }),
    repository_id: z.number().int().min(1),
    ref: branchName(git, "ref").optional(),
  });

/**
 * `POST /api/v1/sandbox/sessions` `{owner, repository, repository_id, ref?}`
 * → 200 the session: `<GIT_BASE_URL>/<owner>/<repository>.git` cloned into
 * its workspace with the principal's stored connection (409 without one).
 */
export const createSession = defineRoute({
  method: "POST",
  path: "/api/v1/sandbox/sessions",
  operationId: "createSandboxSession",
  summary: "Clone a repository into a new session's workspace with the stored credential",
  tag: TAG,
  permission: "sandbox:write",
  body: createSessionBody(anyBranchName),
  bodyValidation: { schemaFor: (deps: SandboxRouteDeps) => createSessionBody(deps.sandbox.git), async: true },
  responses: ok("The session", session),
  errors: ["conflict", "bad_gateway"],
  handler: ({ principal, body: input, res }, deps: SandboxRouteDeps) =>
    deps.sandbox.createSession(
      principal,
      {
        owner: input.owner,
        repository: input.repository,
        repository_id: input.repository_id,
        ref: input.ref,
      },
      clientSignal(res),
    ),
});
