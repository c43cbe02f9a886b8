import { defineRoute } from "@gw/core/http";
import { validateAsync } from "@gw/core/validation";
import { z } from "zod";
import { checkoutPathProblem, leavesWorkspace } from "../checkout.ts";
import type { Git } from "../git.ts";
import type { GitHubPushResult } from "../sandbox.ts";
import { branchName } from "./branch-name.ts";
import { clientSignal } from "./client-signal.ts";
import { anyBranchName, pushResult, type SandboxRouteDeps, TAG } from "./schemas.ts";

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
export const push = defineRoute({
  method: "POST",
  path: "/api/v1/sandbox/sessions/:session_id/github/push",
  operationId: "pushSandboxSession",
  summary: "Push a session's checkout to its repository",
  description:
    "404 for a session that is not the caller's; 409 for a stale generation, a missing connection or a refused update; 502 when the remote cannot be reached.",
  tag: TAG,
  permission: "sandbox:write",
  body: pushRequest(anyBranchName, undefined),
  // Its schema needs the session's workspace: the handler validates it once it has looked the session up.
  bodyValidation: { byHandler: true },
  bodyName: "GitHubPushRequest",
  responses: { 200: { description: "The push's outcome", schema: pushResult, name: "GitHubPushResult" } },
  errors: ["not_found", "conflict", "bad_gateway"],
  handler: async ({ principal, params, body, res }, deps: SandboxRouteDeps) => {
    const { sandbox } = deps;
    const id = params.session_id!;
    const owned = await sandbox.sessions.find(principal, id);
    const request = await validateAsync(
      "body",
      pushRequest(sandbox.git, owned ? sandbox.workspace(id) : undefined),
      body,
    );
    const result: GitHubPushResult = await sandbox.push(principal, id, request, clientSignal(res));
    return result;
  },
});
