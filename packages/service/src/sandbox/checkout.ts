import { lstat, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, sep } from "node:path";
import { AppError } from "@gw/core";
import { type Git, GitFailed, redactGitOutput } from "./git.ts";

/** git's id of the empty tree: what an unborn HEAD holds. */
const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

export class NoRepository extends AppError {
  constructor(checkoutPath: string, detail: string) {
    super(
      "conflict",
      `No git repository root at checkout_path '${checkoutPath}' in the workspace: ${detail}`,
    );
    this.name = "NoRepository";
  }
}

export class CheckoutUnusable extends AppError {
  constructor(checkoutPath: string, detail: string) {
    super("conflict", `git could not commit the working tree at checkout_path '${checkoutPath}': ${detail}`);
    this.name = "CheckoutUnusable";
  }
}

export class NothingToPush extends AppError {
  constructor(checkoutPath: string) {
    super(
      "conflict",
      `The repository at checkout_path '${checkoutPath}' has no commits and no files to push`,
    );
    this.name = "NothingToPush";
  }
}

/** A repository root inside a workspace, every path real and inside it. */
export interface Checkout {
  path: string;
  root: string;
  gitDir: string;
  objectsDir: string;
  indexFile: string;
  /** The repository's own ignore list, `.git/info/exclude`, which `git add` should honour here too. */
  excludeFile: string;
}

/** What is wrong with a `checkout_path` by its spelling alone, if anything. */
export function checkoutPathProblem(path: string): string | undefined {
  if (path.includes("\0")) return "checkout_path must not contain NUL characters";
  if (isAbsolute(path)) return "checkout_path must be relative to the workspace";
  if (path.split("/").includes("..")) return "checkout_path must not contain '..'";
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
 * Finds the repository whose root is `checkoutPath`. Its working tree, git
 * directory, object store and index must all really be inside the workspace,
 * wherever its `.git` file, symlinks or `core.worktree` point.
 */
export async function openCheckout(
  git: Git,
  workspace: string,
  checkoutPath: string,
  signal: AbortSignal,
): Promise<Checkout> {
  const label = checkoutPath;
  let root: string;
  let target: string;
  try {
    root = await realpath(workspace);
    target = await realpath(join(root, checkoutPath));
  } catch {
    throw new NoRepository(label, "no such directory");
  }
  if (!inside(root, target)) throw new NoRepository(label, "it leads outside the workspace");
  if (!(await lstat(target)).isDirectory()) throw new NoRepository(label, "not a directory");
  let lines: string[];
  try {
    const { stdout } = await git.run(
      [
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--absolute-git-dir",
        "--git-path",
        "objects",
        "--git-path",
        "index",
        "--git-path",
        "info/exclude",
      ],
      { cwd: target, env: { GIT_CEILING_DIRECTORIES: dirname(root) }, signal },
    );
    lines = stdout.split("\n");
  } catch (err) {
    if (err instanceof GitFailed && !err.timedOut && !signal.aborted) {
      throw new NoRepository(label, redactGitOutput(err.stderr, []));
    }
    throw err;
  }
  // The index may not exist yet: then the real place git will create it.
  const real = (path: string) =>
    realpath(path).catch(async () => join(await realExisting(dirname(path)), basename(path)));
  const [toplevel, gitDir, objectsDir, indexFile, excludeFile] = await Promise.all(
    lines.slice(0, 5).map(real),
  );
  if (toplevel !== target) throw new NoRepository(label, "it is inside a repository, not its root");
  for (const path of [gitDir!, objectsDir!, indexFile!, excludeFile!]) {
    if (!inside(root, path)) {
      throw new NoRepository(label, `its git data lies outside the workspace (${relative(root, path)})`);
    }
  }
  return {
    path: label,
    root: target,
    gitDir: gitDir!,
    objectsDir: objectsDir!,
    indexFile: indexFile!,
    excludeFile: excludeFile!,
  };
}

/**
 * Commits every change in the working tree (new, modified, deleted files, as
 * `git add -A` sees them) on top of HEAD and moves HEAD there. git reads no
 * configuration of the workspace's repository here (a neutral one stands in),
 * so nothing its agent configured (filters, fsmonitor, hooks) runs. Returns
 * HEAD and whether a commit was made.
 */
export async function commitWorkingTree(
  git: Git,
  checkout: Checkout,
  commit: { message: string; author: { name: string; email: string } },
  signal: AbortSignal,
): Promise<{ head: string; committed: boolean }> {
  const inRepository = { cwd: checkout.root, env: { GIT_DIR: checkout.gitDir }, signal };
  const neutral = {
    cwd: checkout.root,
    signal,
    env: {
      GIT_DIR: git.neutralGitDir,
      GIT_WORK_TREE: checkout.root,
      GIT_INDEX_FILE: checkout.indexFile,
      GIT_OBJECT_DIRECTORY: checkout.objectsDir,
      GIT_AUTHOR_NAME: commit.author.name,
      GIT_AUTHOR_EMAIL: commit.author.email,
      GIT_COMMITTER_NAME: commit.author.name,
      GIT_COMMITTER_EMAIL: commit.author.email,
    },
  };
  try {
    const head = await git
      .run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], inRepository)
      .then((r) => r.stdout.trim())
      .catch((err) => {
        // An unborn branch (a clone of an empty repository) has no HEAD commit yet.
        if (err instanceof GitFailed && err.exitCode === 1) return undefined;
        throw err;
      });
    await git.run(["-c", `core.excludesFile=${checkout.excludeFile}`, "add", "--all", "--", "."], neutral);
    const tree = (await git.run(["write-tree"], neutral)).stdout.trim();
    const headTree = head
      ? (await git.run(["rev-parse", `${head}^{tree}`], neutral)).stdout.trim()
      : EMPTY_TREE;
    if (tree === headTree) {
      if (!head) throw new NothingToPush(checkout.path);
      return { head, committed: false };
    }
    const parents = head ? ["-p", head] : [];
    const created = (
      await git.run(["commit-tree", tree, ...parents, "-m", commit.message], neutral)
    ).stdout.trim();
    // Compare-and-swap: HEAD (the branch it names) moves only if nothing moved it meanwhile.
    await git.run(["update-ref", "-m", commit.message, "HEAD", created, head ?? ""], inRepository);
    return { head: created, committed: true };
  } catch (err) {
    if (err instanceof GitFailed && !err.timedOut && !signal.aborted) {
      throw new CheckoutUnusable(checkout.path, redactGitOutput(err.stderr, []));
    }
    throw err;
  }
}
