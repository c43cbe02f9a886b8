import { principalOf, requirePermission } from "@gw/core/http";
import { validateAsync } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { Git } from "../../sandbox/git.ts";
import type { Sandbox } from "../../sandbox/sandbox.ts";
import type { Session } from "../../sandbox/sessions.ts";
import { branchName } from "./branch-name.ts";
import { clientSignal } from "./client-signal.ts";

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
export function registerCreateSession(router: Router, sandbox: Sandbox): void {
  router.post("/sandbox/sessions", requirePermission("sandbox:write"), async (req, res) => {
    const input = await validateAsync("body", createSessionBody(sandbox.git), req.body);
    const session = await sandbox.createSession(
      principalOf(res),
      {
        owner: input.owner,
        repository: input.repository,
        repository_id: input.repository_id,
        ref: input.ref,
      },
      clientSignal(res),
    );
    res.json(session);
  });
}
