import { mkdir, realpath, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Checkout } from "./checkout.ts";
import { type Git, GitFailed, redactGitOutput } from "./git.ts";

export class RemoteFailed extends AppError {
  constructor(operation: string, detail: string) {
    super("bad_gateway", `git ${operation} failed: ${detail}`, { reason: "remote_failed" });
    this.name = "RemoteFailed";
  }
}

export class GitTimedOut extends AppError {
  constructor(operation: string, timeoutMs: number) {
    super("gateway_timeout", `git ${operation} did not finish within ${timeoutMs} ms`, {
      reason: "git_timed_out",
    });
    this.name = "GitTimedOut";
  }
}

export class PushRejected extends AppError {
  constructor(branch: string, detail: string) {
    super("conflict", `The remote refused to update branch '${branch}': ${detail}`, {
      reason: "push_rejected",
    });
    this.name = "PushRejected";
  }
}

/**
 * What went wrong with a remote, told apart by git's error output and said
 * in the service's own words: git's text (paths, URLs, whatever a remote or
 * a proxy prints) never reaches a client. The first match wins.
 */
const REMOTE_PROBLEMS: [RegExp, string][] = [
  [
    /Authentication failed|could not read (Username|Password)|terminal prompts disabled|Invalid username or password|returned error: 40[13]\b/i,
    "the remote refused the credentials",
  ],
  [
    /does not appear to be a git repository|Repository not found|returned error: 404\b/i,
    "the remote has no such repository",
  ],
  [/Remote branch .* not found|couldn't find remote ref/i, "the remote has no such branch or tag"],
  [
    /SSL certificate problem|server certificate verification failed|SSL_connect|SSL routines|gnutls_handshake|TLS connect error/i,
    "no secure connection to the remote could be made",
  ],
  [
    /Could not resolve (host|proxy)|Failed to connect|Could not connect|Couldn't connect|Connection (refused|timed out|reset)|Network is unreachable|No route to host|Operation timed out|Empty reply from server|Recv failure|unable to access/i,
    "the remote could not be reached",
  ],
  [/failed to push|\[rejected\]|\[remote rejected\]/i, "the remote rejected the push"],
  [/returned error: 5\d\d|HTTP 5\d\d|remote end hung up/i, "the remote failed to answer"],
];

/** The failure of a git call in the service's own words (see `REMOTE_PROBLEMS`). */
export function remoteProblem(stderr: string): string {
  return REMOTE_PROBLEMS.find(([pattern]) => pattern.test(stderr))?.[1] ?? "the remote could not be used";
}

/**
 * A failed git call as the client sees it: stopped, timed out, or what went
 * wrong in the service's own words. git's own output (redacted) goes to the
 * log only.
 */
export function remoteFailure(
  err: unknown,
  call: {
    operation: string;
    token: string;
    signal: AbortSignal | undefined;
    timeoutMs: number;
    logger: Logger;
  },
): unknown {
  if (!(err instanceof GitFailed)) return err;
  // Stopped on purpose (the caller left, the session's lock was lost): the reason says why.
  if (call.signal?.aborted) return call.signal.reason ?? err;
  if (err.timedOut) return new GitTimedOut(call.operation, call.timeoutMs);
  const failure = new RemoteFailed(call.operation, remoteProblem(err.stderr));
  call.logger.warn(
    {
      operation: call.operation,
      exitCode: err.exitCode,
      gitError: redactGitOutput(err.stderr, [call.token]),
      answered: failure.message,
    },
    "git could not use the remote",
  );
  return failure;
}

/**
 * Clones `url` (at `ref`, if given) into the session's git directory
 * `gitDir` (bare: the service's alone) with the caller's token, then checks
 * its HEAD out into `workspace`, which holds only the files.
 */
export async function cloneRepository(
  git: Git,
  clone: {
    url: string;
    gitDir: string;
    workspace: string;
    ref: string | undefined;
    token: string;
    signal?: AbortSignal;
  },
): Promise<void> {
  const ref = clone.ref ? [`--branch=${clone.ref}`] : [];
  const signal = clone.signal ? { signal: clone.signal } : {};
  await git.run(["clone", "--quiet", "--bare", "--no-local", ...ref, "--", clone.url, clone.gitDir], {
    token: clone.token,
    ...signal,
  });
  await mkdir(clone.workspace, { recursive: true });
  const index = join(clone.gitDir, "index");
  const inRepository = {
    cwd: clone.gitDir,
    env: { GIT_DIR: clone.gitDir, GIT_WORK_TREE: clone.workspace, GIT_INDEX_FILE: index },
    ...signal,
  };
  try {
    await git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], inRepository);
  } catch (err) {
    // An empty repository: nothing to check out.
    if (err instanceof GitFailed && err.exitCode === 1) return;
    throw err;
  }
  try {
    await git.run(["read-tree", "--reset", "-u", "HEAD"], inRepository);
  } finally {
    await rm(index, { force: true });
  }
}

/**
 * Pushes commit `sha` to `refs/heads/<branch>` of `url` (forced if asked)
 * from the session's own git directory, which only the service writes: only
 * its objects can go, and nothing in the workspace (a `.git` with remotes,
 * `insteadOf` rewrites, alternates) steers what is sent or where the token
 * goes. Answers whether the remote branch was already there.
 */
export async function pushCommit(
  git: Git,
  push: { checkout: Checkout; url: string; sha: string; branch: string; force: boolean; token: string },
  signal: AbortSignal,
): Promise<"up_to_date" | "updated"> {
  const refspec = `${push.force ? "+" : ""}${push.sha}:refs/heads/${push.branch}`;
  let stdout: string;
  try {
    ({ stdout } = await git.run(["push", "--porcelain", "--", push.url, refspec], {
      cwd: push.checkout.gitDir,
      env: { GIT_DIR: push.checkout.gitDir },
      token: push.token,
      signal,
    }));
  } catch (err) {
    // With --porcelain, a ref the remote refused is a line starting with "!"; anything else failed on the way.
    const refused = err instanceof GitFailed && !signal.aborted ? rejectedRef(err.stdout) : undefined;
    if (refused && err instanceof GitFailed) {
      // A remote on this machine (a `file:` URL, in development) names its own files in its errors.
      const hidden = [push.token, ...(await localPathsOf(push.url))];
      const remote = redactGitOutput(
        err.stderr
          .split("\n")
          .filter((line) => line.startsWith("remote:"))
          .join("\n"),
        hidden,
      );
      throw new PushRejected(
        push.branch,
        [redactGitOutput(refused, hidden), remote].filter(Boolean).join("\n"),
      );
    }
    throw err;
  }
  return /^=\t/m.test(stdout) ? "up_to_date" : "updated";
}

/** The directory a `file:` remote is, as its errors may spell it (and the real path, which git prints too). */
async function localPathsOf(url: string): Promise<string[]> {
  if (!url.startsWith("file:")) return [];
  const path = fileURLToPath(url);
  // Not there: git names it as given.
  const real = await realpath(path).catch(() => path);
  return [path, real].sort((a, b) => b.length - a.length);
}

function rejectedRef(porcelain: string): string | undefined {
  const line = porcelain.split("\n").find((l) => l.startsWith("!\t"));
  return line?.split("\t")[2];
}

/** The commit `refs/heads/<branch>` points to on the remote, if the branch exists. */
export async function remoteBranchHead(
  git: Git,
  query: { url: string; branch: string; token: string },
  signal: AbortSignal,
): Promise<string | undefined> {
  const ref = `refs/heads/${query.branch}`;
  const { stdout } = await git.run(["ls-remote", "--", query.url, ref], {
    env: { GIT_DIR: git.neutralGitDir },
    token: query.token,
    signal,
  });
  // ls-remote matches patterns by their tail; only the exact ref counts.
  for (const line of stdout.split("\n")) {
    const [sha, name] = line.split("\t");
    if (name === ref && sha) return sha;
  }
  return undefined;
}
