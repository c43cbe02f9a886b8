import { resolve, sep } from "node:path";
import { env } from "@gw/core/config";
import { z } from "zod";

/** The sandbox's part of the service's environment (spread into its schema). */
export const sandboxEnvShape = {
  /** Directory holding one workspace per session, `<root>/<session_id>`. Default $DATA_DIR/sandbox. */
  SANDBOX_ROOT: z.string().optional(),
  /** Directory of each session's repository (git directory), `<dir>/<session_id>.git`; never inside SANDBOX_ROOT. Default $DATA_DIR/sandbox-git. */
  SANDBOX_GIT_DIR: z.string().optional(),
  /** Key of GitHub connections stored before they moved to the vault (VAULT_KEYS): read only to move each into it at its next use; 32 bytes, base64. Unset: the development key an earlier version kept under DATA_DIR, if any. */
  SANDBOX_CONNECTION_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/_-]{43}=?$/, "must be 32 bytes, base64 (e.g. `openssl rand -base64 32`)")
    .optional(),
  /** Where repositories live: `<GIT_BASE_URL>/<owner>/<repository>.git`; https, or file for local bare repositories. */
  GIT_BASE_URL: z
    .string()
    .default("https://github.com")
    .superRefine((value, ctx) => {
      const problem = baseUrlProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .transform((value) => value.replace(/\/+$/, "")),
  /** Author and committer of the commits a push makes, `Name <email>`. */
  SANDBOX_GIT_AUTHOR: z
    .string()
    .default("Sandbox <sandbox@localhost>")
    .transform((value, ctx) => {
      const match = /^([^<>\n]+?)\s*<([^<>\s]+)>$/.exec(value.trim());
      if (!match) {
        ctx.addIssue({ code: "custom", message: "must look like `Name <email>`" });
        return z.NEVER;
      }
      return { name: match[1]!, email: match[2]! };
    }),
  /** Time one git call (clone, commit, push…) may take before it is killed, in milliseconds. Default 60000. */
  SANDBOX_GIT_TIMEOUT_MS: env.positiveInt(60_000),
  /** How long a push waits for another push of the same session to finish, in milliseconds. Default 60000. */
  SANDBOX_PUSH_WAIT_MS: env.positiveInt(60_000),
  /** A PEM file of extra CA certificates git trusts for GIT_BASE_URL (e.g. an enterprise server's private CA). */
  SANDBOX_GIT_CA_FILE: z.string().optional(),
};

function baseUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "file:") return "must be an https:// or file:// URL";
  if (url.username || url.password)
    return "must not carry credentials: pushes use each caller's stored connection";
  if (url.search || url.hash) return "must not have a query or fragment";
  return undefined;
}

type SandboxEnv = z.output<z.ZodObject<typeof sandboxEnvShape>> & { DATA_DIR: string };

export interface SandboxOptions {
  root: string;
  /** Where the service keeps the sessions' git directories, out of the agents' reach. */
  repositories: string;
  connectionKey: string | undefined;
  dataDir: string;
  baseUrl: string;
  author: { name: string; email: string };
  gitTimeoutMs: number;
  pushWaitMs: number;
  caFile: string | undefined;
}

const sandboxDirs = (c: SandboxEnv) => ({
  root: resolve(c.SANDBOX_ROOT ?? resolve(c.DATA_DIR, "sandbox")),
  repositories: resolve(c.SANDBOX_GIT_DIR ?? resolve(c.DATA_DIR, "sandbox-git")),
});

/** The repositories must lie outside the workspaces (which the agents write), and the workspaces outside them. */
export function checkSandboxEnv(c: SandboxEnv, ctx: z.RefinementCtx): void {
  const { root, repositories } = sandboxDirs(c);
  const within = (dir: string, outer: string) => dir === outer || dir.startsWith(`${outer}${sep}`);
  if (within(repositories, root) || within(root, repositories)) {
    ctx.addIssue({
      code: "custom",
      path: ["SANDBOX_GIT_DIR"],
      message: `must not contain SANDBOX_ROOT or lie inside it (${repositories}, ${root}): the agents write the workspaces, never the repositories`,
    });
  }
}

export function sandboxOptions(c: SandboxEnv): SandboxOptions {
  const { root, repositories } = sandboxDirs(c);
  return {
    root,
    repositories,
    connectionKey: c.SANDBOX_CONNECTION_KEY,
    dataDir: c.DATA_DIR,
    baseUrl: c.GIT_BASE_URL,
    author: c.SANDBOX_GIT_AUTHOR,
    gitTimeoutMs: c.SANDBOX_GIT_TIMEOUT_MS,
    pushWaitMs: c.SANDBOX_PUSH_WAIT_MS,
    caFile: c.SANDBOX_GIT_CA_FILE ? resolve(c.SANDBOX_GIT_CA_FILE) : undefined,
  };
}
