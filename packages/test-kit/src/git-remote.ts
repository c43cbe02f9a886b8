/**
 * Git remotes for tests: bare repositories in a temporary directory (reached
 * as `file://`), and optionally served over HTTPS with password
 * authentication by git's own `git http-backend`, so a push meets a real
 * smart-HTTP server that asks for credentials.
 */

import { execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { selfSignedCert } from "./self-signed.ts";

const run = promisify(execFile);

/** The environment of the tests' own git calls: no user config, a fixed author, file transport allowed. */
export const testGitEnv: NodeJS.ProcessEnv = {
  PATH: process.env.PATH,
  HOME: tmpdir(),
  LC_ALL: "C",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_TERMINAL_PROMPT: "0",
  GIT_AUTHOR_NAME: "Test Person",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_COMMITTER_NAME: "Test Person",
  GIT_COMMITTER_EMAIL: "test@example.com",
  GIT_CONFIG_COUNT: "1",
  GIT_CONFIG_KEY_0: "protocol.file.allow",
  GIT_CONFIG_VALUE_0: "always",
};

/** Runs the test's own git (never the service's) and returns its trimmed output. */
export async function git(args: string[], cwd?: string): Promise<string> {
  const { stdout } = await run("git", args, { cwd, env: testGitEnv });
  return stdout.trim();
}

export interface BareRepositories {
  /** The directory holding `<owner>/<repository>.git`; `file://` + it is a `GIT_BASE_URL`. */
  root: string;
  /** Makes `<owner>/<repository>.git` with one commit on `main` holding `files`. */
  create(owner: string, repository: string, files?: Record<string, string>): Promise<string>;
  /** The commit `branch` points to, if it exists. */
  branchHead(owner: string, repository: string, branch: string): Promise<string | undefined>;
  /** A throwaway clone of the repository, for committing to it as someone else would. */
  clone(owner: string, repository: string): Promise<string>;
  remove(): Promise<void>;
}

export async function bareRepositories(root?: string): Promise<BareRepositories> {
  const dir = root ?? (await mkdtemp(join(tmpdir(), "gw-test-remotes-")));
  const scratch = await mkdtemp(join(tmpdir(), "gw-test-clones-"));
  let clones = 0;
  const path = (owner: string, repository: string) => join(dir, owner, `${repository}.git`);
  return {
    root: dir,
    async create(owner, repository, files = { "README.md": `# ${repository}\n` }) {
      const bare = path(owner, repository);
      await mkdir(dirname(bare), { recursive: true });
      const work = join(scratch, `seed-${clones++}`);
      await mkdir(work, { recursive: true });
      for (const [name, content] of Object.entries(files)) {
        await mkdir(dirname(join(work, name)), { recursive: true });
        await writeFile(join(work, name), content);
      }
      // One shell runs the five commands: every process this (large) test process starts is a fork of it.
      await run(
        "sh",
        [
          "-c",
          'git init --quiet --bare --initial-branch=main "$1" && git init --quiet --initial-branch=main . && ' +
            'git add --all && git commit --quiet -m "Initial commit" && git push --quiet "$1" main',
          "sh",
          bare,
        ],
        { cwd: work, env: testGitEnv },
      );
      return bare;
    },
    async branchHead(owner, repository, branch) {
      try {
        return await git([
          "--git-dir",
          path(owner, repository),
          "rev-parse",
          "--verify",
          `refs/heads/${branch}`,
        ]);
      } catch {
        return undefined;
      }
    },
    async clone(owner, repository) {
      const work = join(scratch, `clone-${clones++}`);
      await git(["clone", "--quiet", path(owner, repository), work]);
      return work;
    },
    async remove() {
      await rm(dir, { recursive: true, force: true });
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

export interface HttpsGitServer {
  /** `https://127.0.0.1:<port>`: a `GIT_BASE_URL`. */
  url: string;
  /** The self-signed certificate to trust (`SANDBOX_GIT_CA_FILE`). */
  caFile: string;
  /** The password every request must carry (user `x-access-token`); changeable. */
  password: string;
  /** Every request's path and whether it carried the right credentials. */
  requests: { method: string; path: string; authorized: boolean }[];
  /** When set, a receive-pack POST (the push itself) waits for it before git handles it. */
  beforeReceivePack?: () => Promise<void>;
  close(): Promise<void>;
}

/**
 * Serves `root` (the repositories of `bareRepositories`) over HTTPS with
 * `git http-backend`. Requests without `x-access-token:<password>` in Basic
 * authentication get 401. Repository hooks run with the password a request
 * presented in `GW_TEST_PRESENTED_PASSWORD`, so a test can make a remote
 * repeat a credential back in its error text.
 */
export async function startHttpsGitServer(root: string, password: string): Promise<HttpsGitServer> {
  const certDir = await mkdtemp(join(tmpdir(), "gw-test-tls-"));
  const { keyFile, certFile: caFile } = await selfSignedCert(certDir);

  const state: HttpsGitServer = {
    url: "",
    caFile,
    password,
    requests: [],
    close: async () => undefined,
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    const [scheme, encoded] = (req.headers.authorization ?? "").split(" ");
    const presented = scheme === "Basic" ? Buffer.from(encoded ?? "", "base64").toString() : "";
    const authorized = presented === `x-access-token:${state.password}`;
    state.requests.push({ method: req.method ?? "", path: url.pathname, authorized });
    if (!authorized) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="git"' }).end();
      return;
    }
    if (url.pathname.endsWith("/git-receive-pack") && req.method === "POST")
      await state.beforeReceivePack?.();
    const backend = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        REMOTE_USER: "x-access-token",
        REMOTE_ADDR: "127.0.0.1",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
        HTTP_GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
        GW_TEST_PRESENTED_PASSWORD: presented.slice("x-access-token:".length),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(backend.stdin);
    let head = Buffer.alloc(0);
    let started = false;
    backend.stdout.on("data", (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      started = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    backend.on("close", () => res.end());
  };
  const server = createServer(
    { key: await readFile(keyFile), cert: await readFile(caFile) },
    (req, res) => void handle(req, res).catch(() => res.destroy()),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(certDir, { recursive: true, force: true });
  };
  return state;
}
