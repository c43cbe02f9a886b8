import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cutText } from "@gw/core/errors";

/** Environment variables of the service that git may see; everything else (keys, secrets) stays out. */
const PASSED_THROUGH = ["PATH", "TMPDIR", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"];

/**
 * Names the file the token waits in for `GIT_ASKPASS`: a file only the
 * service's user can read, there only while its one git call runs. The token
 * itself is in no process's environment, so nothing git starts (a `file://`
 * remote's receive-pack and its hooks included) inherits it.
 */
const TOKEN_FILE_VARIABLE = "GW_GIT_TOKEN_FILE";

/**
 * Answers git's credential prompts from that file, so the token never
 * appears in an argument list, a URL or an environment. GitHub takes any
 * token as the password of `x-access-token`.
 */
const ASKPASS_SCRIPT = `#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' x-access-token ;;
  *) cat "$${TOKEN_FILE_VARIABLE}" ;;
esac
`;

/** The most of a call's output kept; a caller that must see all of it checks for this length. */
export const STDOUT_LIMIT = 4 * 1024 * 1024;
const STDERR_LIMIT = 64 * 1024;

export interface GitSettings {
  /** `https://…` or `file://…`; `file` is allowed to git only when this is a file URL. */
  baseUrl: string;
  timeoutMs: number;
  caFile: string | undefined;
}

export interface GitCall {
  cwd?: string;
  /** Extra variables (GIT_DIR, GIT_WORK_TREE, author…). */
  env?: Record<string, string>;
  /**
   * The caller's credential, handed to git's askpass through a private file
   * for an https base URL; a `file://` base URL asks for none, so git never gets it.
   */
  token?: string;
  signal?: AbortSignal;
}

/** A git call that exited non-zero, was killed at its deadline, or was cancelled. */
export class GitFailed extends Error {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;

  constructor(
    args: string[],
    result: { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean },
  ) {
    super(`git ${args[0]} failed (${result.timedOut ? "timed out" : `exit ${result.exitCode}`})`);
    this.name = "GitFailed";
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    this.timedOut = result.timedOut;
  }
}

/**
 * Runs the real `git` binary, never through a shell, with an environment made
 * from scratch: no user or system git config, no terminal prompts, hooks off,
 * only https (and file, for a file:// base URL) as transports, credentials only
 * through askpass, and a deadline on every call that kills git and everything
 * it started.
 */
export class Git {
  /** An empty repository of the service's, for calls that need one but no session's (`ls-remote`). */
  readonly neutralGitDir: string;
  private readonly dir: string;
  private readonly settings: GitSettings;
  private readonly baseEnv: Record<string, string>;
  /** Whether remotes ask for credentials: https does, the local file transport never. */
  private readonly sendsToken: boolean;

  private constructor(dir: string, settings: GitSettings) {
    this.dir = dir;
    this.settings = settings;
    this.neutralGitDir = join(dir, "neutral", ".git");
    this.sendsToken = !settings.baseUrl.startsWith("file:");
    const config: [string, string][] = [
      ["core.hooksPath", "/dev/null"],
      ["core.fsmonitor", "false"],
      // A symlink in a working tree is committed as the symlink it is, never followed.
      ["core.symlinks", "true"],
      // An empty helper resets the list, so no helper from a repository's config runs.
      ["credential.helper", ""],
      ["commit.gpgSign", "false"],
      ["gc.auto", "0"],
      ["protocol.allow", "never"],
      ["protocol.https.allow", "always"],
    ];
    if (settings.baseUrl.startsWith("file:")) config.push(["protocol.file.allow", "always"]);
    const env: Record<string, string> = {};
    for (const name of PASSED_THROUGH) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(env, {
      HOME: dir,
      LC_ALL: "C",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
      // No object comes from anywhere but the repository named: no replacements (alternates are not passed through either).
      GIT_NO_REPLACE_OBJECTS: "1",
      GIT_ASKPASS: join(dir, "askpass.sh"),
      GIT_CONFIG_COUNT: String(config.length),
    });
    config.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
    if (settings.caFile) env.GIT_SSL_CAINFO = settings.caFile;
    this.baseEnv = env;
  }

  static async create(settings: GitSettings): Promise<Git> {
    const dir = await mkdtemp(join(tmpdir(), "gw-sandbox-git-"));
    await chmod(dir, 0o700);
    await writeFile(join(dir, "askpass.sh"), ASKPASS_SCRIPT, { mode: 0o700 });
    await mkdir(join(dir, "outside"));
    await mkdir(join(dir, "tokens"), { mode: 0o700 });
    const git = new Git(dir, settings);
    await git.run(["init", "--quiet", join(dir, "neutral")]);
    return git;
  }

  /** The clone URL of a repository: `<base>/<owner>/<repository>.git`. */
  repositoryUrl(owner: string, repository: string): string {
    return `${this.settings.baseUrl}/${owner}/${repository}.git`;
  }

  /** Whether `git check-ref-format --branch` accepts `name` as it is (never an option, never `@{-1}` expanded). */
  async isValidBranchName(name: string): Promise<boolean> {
    if (name.startsWith("-") || name.includes("\0")) return false;
    try {
      // Outside any repository, so shorthands like `@{-1}` cannot resolve to something else.
      const { stdout } = await this.run(["check-ref-format", "--branch", name], {
        cwd: join(this.dir, "outside"),
        env: { GIT_CEILING_DIRECTORIES: this.dir },
      });
      return stdout.replace(/\n$/, "") === name;
    } catch (err) {
      if (err instanceof GitFailed && !err.timedOut) return false;
      throw err;
    }
  }

  async run(args: string[], call: GitCall = {}): Promise<{ stdout: string; stderr: string }> {
    if (call.token === undefined || !this.sendsToken) return this.start(args, call, undefined);
    const file = join(this.dir, "tokens", randomBytes(16).toString("hex"));
    await writeFile(file, `${call.token}\n`, { mode: 0o600, flag: "wx" });
    try {
      return await this.start(args, call, file);
    } finally {
      await rm(file, { force: true });
    }
  }

  private start(
    args: string[],
    call: GitCall,
    tokenFile: string | undefined,
  ): Promise<{ stdout: string; stderr: string }> {
    const env = { ...this.baseEnv, ...call.env };
    if (tokenFile !== undefined) env[TOKEN_FILE_VARIABLE] = tokenFile;
    return new Promise((resolve, reject) => {
      // Its own process group, so a deadline or a cancel also ends the helpers git started (remote-https, pack-objects).
      const child = spawn("git", args, {
        cwd: call.cwd ?? this.dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
        shell: false,
      });
      let stdout = "";
      let stderr = "";
      let timedOut = false;
      child.stdout.on("data", (chunk: Buffer) => {
        if (stdout.length < STDOUT_LIMIT) stdout += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        if (stderr.length < STDERR_LIMIT) stderr += chunk.toString();
      });
      const killGroup = () => {
        try {
          if (child.pid) process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, this.settings.timeoutMs);
      const onAbort = () => killGroup();
      if (call.signal?.aborted) killGroup();
      call.signal?.addEventListener("abort", onAbort, { once: true });
      child.once("error", (err) => {
        clearTimeout(timer);
        call.signal?.removeEventListener("abort", onAbort);
        reject(err);
      });
      child.once("close", (exitCode) => {
        clearTimeout(timer);
        call.signal?.removeEventListener("abort", onAbort);
        if (exitCode === 0) resolve({ stdout, stderr });
        else reject(new GitFailed(args, { exitCode, stdout, stderr, timedOut }));
      });
    });
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * git's own words for a client, without anything secret: the token wherever
 * it appears, and credentials in any URL. Hints are dropped; length is capped.
 */
export function redactGitOutput(text: string, secrets: (string | undefined)[]): string {
  let out = text
    .split("\n")
    .filter((line) => !line.startsWith("hint:"))
    .join("\n")
    .trim();
  for (const secret of secrets) if (secret) out = out.split(secret).join("[redacted]");
  out = out.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s'"]*@/gi, "$1[redacted]@");
  return cutText(out, 2000);
}
