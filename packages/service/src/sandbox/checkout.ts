import { lstat, realpath, rm } from "node:fs/promises";
import { dirname, isAbsolute, join, sep } from "node:path";
import { AppError } from "@gw/core/errors";
import { type Git, GitFailed, redactGitOutput, STDOUT_LIMIT } from "./git.ts";

/** git's id of the empty tree: what an unborn HEAD holds. */
const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/** git's file mode of a gitlink: a directory recorded as another repository's commit. */
const GITLINK = "160000";

export class NoWorkingTree extends AppError {
  constructor(checkoutPath: string, detail: string) {
    super("conflict", `No directory at checkout_path '${checkoutPath}' in the workspace: ${detail}`, {
      reason: "no_working_tree",
    });
    this.name = "NoWorkingTree";
  }
}

export class RepositoryMissing extends AppError {
  constructor() {
    super(
      "conflict",
      "The service holds no repository for this session (it was made before repositories moved out of the workspaces, or its repository was removed); create a new session",
      { reason: "repository_missing" },
    );
    this.name = "RepositoryMissing";
  }
}

export class CheckoutUnusable extends AppError {
  constructor(checkoutPath: string, detail: string) {
    super("conflict", `git could not commit the working tree at checkout_path '${checkoutPath}': ${detail}`, {
      reason: "checkout_unusable",
    });
    this.name = "CheckoutUnusable";
  }
}

export class NestedRepository extends AppError {
  constructor(checkoutPath: string, paths: string[]) {
    const shown = paths
      .slice(0, 5)
      .map((p) => `'${p}'`)
      .join(", ");
    super(
      "conflict",
      `The working tree at checkout_path '${checkoutPath}' holds a nested git repository at ${shown}${paths.length > 5 ? " and more" : ""}: a push commits files only; remove its .git, or push it with its own checkout_path`,
      { reason: "nested_repository" },
    );
    this.name = "NestedRepository";
  }
}

export class NothingToPush extends AppError {
  constructor(checkoutPath: string) {
    super(
      "conflict",
      `The repository at checkout_path '${checkoutPath}' has no commits and no files to push`,
      { reason: "nothing_to_push" },
    );
    this.name = "NothingToPush";
  }
}

/**
 * A session's repository as a push uses it: the git directory the service
 * keeps out of the agent's reach, and the working tree, a directory of the
 * workspace, whose files it commits.
 */
export interface Checkout {
  path: string;
  gitDir: string;
  workTree: string;
}

/** The longest name of a file or directory (Linux's NAME_MAX), in bytes. */
const MAX_NAME_BYTES = 255;

/** What is wrong with a `checkout_path` by its spelling alone, if anything. */
export function checkoutPathProblem(path: string): string | undefined {
  if (path.includes("\0")) return "checkout_path must not contain NUL characters";
  if (isAbsolute(path)) return "checkout_path must be relative to the workspace";
  if (path.split("/").includes("..")) return "checkout_path must not contain '..'";
  // The file system's own limit (NAME_MAX): a longer name cannot exist, and asking for one fails.
  if (path.split("/").some((name) => Buffer.byteLength(name) > MAX_NAME_BYTES))
    return `checkout_path must not hold a name longer than ${MAX_NAME_BYTES} bytes`;
  return undefined;
}

const inside = (root: string, path: string) => path === root || path.startsWith(root + sep);

/**
 * The real path `path` leads to, following symlinks; for a path that does not
 * exist (yet), the real path of its nearest existing ancestor.
 */
async function realExisting(path: string): Promise<string> {
  for (let probe = path; ; probe = dirname(probe)) {
    try {
      return await realpath(probe);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== "ENOENT" && code !== "ENOTDIR") || probe === dirname(probe)) throw err;
    }
  }
}

/** Whether `checkoutPath`, symlinks followed, leads out of the workspace. A missing workspace leads nowhere. */
export async function leavesWorkspace(workspace: string, checkoutPath: string): Promise<boolean> {
  let root: string;
  try {
    root = await realpath(workspace);
  } catch {
    return false;
  }
  return !inside(root, await realExisting(join(root, checkoutPath)));
}

/**
 * The session's repository with the directory at `checkoutPath` as its
 * working tree; the directory must really be inside the workspace. Nothing
 * in the workspace is read as git data: a `.git` there is the agent's own.
 */
export async function openCheckout(
  gitDir: string,
  workspace: string,
  checkoutPath: string,
): Promise<Checkout> {
  const label = checkoutPath;
  if (
    !(await lstat(gitDir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    throw new RepositoryMissing();
  let root: string;
  let target: string;
  try {
    root = await realpath(workspace);
    target = await realpath(join(root, checkoutPath));
  } catch {
    throw new NoWorkingTree(label, "no such directory");
  }
  if (!inside(root, target)) throw new NoWorkingTree(label, "it leads outside the workspace");
  if (!(await lstat(target)).isDirectory()) throw new NoWorkingTree(label, "not a directory");
  return { path: label, gitDir, workTree: target };
}

/**
 * Commits the working tree, as files, on top of the session's HEAD and moves
 * HEAD there. git works in the service's git directory with a fresh index
 * (read from HEAD, so nothing the agent did can make a changed file look
 * unchanged) and the service's configuration only: no filter, hook or
 * fsmonitor of the agent's runs, a symlink is committed as a symlink, and
 * every `.git` in the working tree is skipped, as git always skips it. A
 * directory holding its own repository would be recorded as that
 * repository's commit (a gitlink read from its `.git`): that is refused.
 * Returns HEAD and whether a commit was made.
 */
export async function commitWorkingTree(
  git: Git,
  checkout: Checkout,
  commit: { message: string; author: { name: string; email: string } },
  signal: AbortSignal,
): Promise<{ head: string; committed: boolean }> {
  const index = join(checkout.gitDir, "index");
  const call = {
    cwd: checkout.gitDir,
    signal,
    env: {
      GIT_DIR: checkout.gitDir,
      GIT_WORK_TREE: checkout.workTree,
      GIT_INDEX_FILE: index,
      GIT_AUTHOR_NAME: commit.author.name,
      GIT_AUTHOR_EMAIL: commit.author.email,
      GIT_COMMITTER_NAME: commit.author.name,
      GIT_COMMITTER_EMAIL: commit.author.email,
    },
  };
  try {
    const head = await git
      .run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], call)
      .then((r) => r.stdout.trim())
      .catch((err) => {
        // An unborn branch (a clone of an empty repository) has no HEAD commit yet.
        if (err instanceof GitFailed && err.exitCode === 1) return undefined;
        throw err;
      });
    // The session's lock is held: an index (or its lock file) left by a push that died is stale.
    await rm(index, { force: true });
    await rm(`${index}.lock`, { force: true });
    await git.run(head ? ["read-tree", head] : ["read-tree", "--empty"], call);
    await git.run(["add", "--all"], call);
    const nested = await gitlinksAdded(git, head ?? EMPTY_TREE, call);
    if (nested.length > 0) throw new NestedRepository(checkout.path, nested);
    const tree = (await git.run(["write-tree"], call)).stdout.trim();
    const headTree = head ? (await git.run(["rev-parse", `${head}^{tree}`], call)).stdout.trim() : EMPTY_TREE;
    if (tree === headTree) {
      if (!head) throw new NothingToPush(checkout.path);
      return { head, committed: false };
    }
    const parents = head ? ["-p", head] : [];
    const created = (
      await git.run(["commit-tree", tree, ...parents, "-m", commit.message], call)
    ).stdout.trim();
    // Compare-and-swap: HEAD (the branch it names) moves only if nothing moved it meanwhile.
    await git.run(["update-ref", "-m", commit.message, "HEAD", created, head ?? ""], call);
    return { head: created, committed: true };
  } catch (err) {
    if (err instanceof GitFailed && !err.timedOut && !signal.aborted) {
      throw new CheckoutUnusable(checkout.path, redactGitOutput(err.stderr, []));
    }
    throw err;
  } finally {
    await rm(index, { force: true });
  }
}

/** Paths the index now records as gitlinks that `base` did not (new ones, or ones pointing elsewhere). */
async function gitlinksAdded(
  git: Git,
  base: string,
  call: { cwd: string; signal: AbortSignal; env: Record<string, string> },
): Promise<string[]> {
  const { stdout } = await git.run(["diff-index", "--cached", "--raw", "--no-renames", "-z", base], call);
  if (stdout.length >= STDOUT_LIMIT) {
    throw new GitFailed(["diff-index"], {
      exitCode: null,
      stdout: "",
      stderr: "too many changes to check in one push",
      timedOut: false,
    });
  }
  // `-z` raw records: ":<old mode> <new mode> <old id> <new id> <status>" NUL "<path>" NUL.
  const fields = stdout.split("\0");
  const found: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const newMode = fields[i]!.split(" ")[1];
    if (newMode === GITLINK) found.push(fields[i + 1]!);
  }
  return found;
}
