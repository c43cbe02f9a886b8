import { principalOf, requirePermission } from "@gw/core/http";
import { validateAsync } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { checkoutPathProblem, leavesWorkspace } from "../../sandbox/checkout.ts";
import type { Git } from "../../sandbox/git.ts";
import type { GitHubPushResult, Sandbox } from "../../sandbox/sandbox.ts";
import { branchName } from "./branch-name.ts";
import { clientSignal } from "./client-signal.ts";

export type { GitHubPushResult };

/**
 * `GitHubPushRequest` (API reference §2.2, see docs/api/README.md). `checkout_path` is checked against the
 * workspace too when the session is the caller's: followed through symlinks,
 * it must stay inside.
 */
export const pushRequest = (git: Pick<Git, "isValidBranchName">, workspace: string | undefined) =>
  z.strictObject({
    assignment_generation: z.number().int().min(1),
    branch: branchName(git, "branch"),
    checkout_path: z
      .string()
      .max(512, { abort: true })
      .superRefine(async (path, ctx) => {
        const problem = checkoutPathProblem(path);
        const message = problem
          ? problem
          : workspace && (await leavesWorkspace(workspace, path))
            ? "checkout_path leads outside the workspace"
            : undefined;
        if (message) ctx.addIssue({ code: "custom", input: path, message: `Value error, ${message}` });
      })
      .default(""),
    force: z.boolean().default(false),
  });

/**
 * `POST /api/v1/sandbox/sessions/{session_id}/github/push` (API reference §4.1) → 200
 * `GitHubPushResult`. Every validation problem comes in one 422; then 404 for
 * a session that is not the caller's, 409 for a stale generation, a missing
 * connection or a refused update, 502 when the remote cannot be reached.
 */
export function registerPush(router: Router, sandbox: Sandbox): void {
  router.post(
    "/sandbox/sessions/:session_id/github/push",
    requirePermission("sandbox:write"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.session_id);
      const owned = await sandbox.sessions.find(principal, id);
      const request = await validateAsync(
        "body",
        pushRequest(sandbox.git, owned ? sandbox.workspace(id) : undefined),
        req.body,
      );
      const result: GitHubPushResult = await sandbox.push(principal, id, request, clientSignal(res));
      res.json(result);
    },
  );
}
