import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { bareRepositories, startHttpsGitServer } from "@gw/test-kit/git-remote";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const run = promisify(execFile);

/** Pushes to a real smart-HTTP git server over TLS that asks for credentials. */
const remotes = await bareRepositories();
const server = await startHttpsGitServer(remotes.root, "");
const logs: string[] = [];
const stack = useStack(
  {
    GIT_BASE_URL: server.url,
    SANDBOX_GIT_CA_FILE: server.caFile,
    SANDBOX_CONNECTION_KEY: randomBytes(32).toString("base64"),
  },
  {},
  logs,
);
const SANDBOX = "/api/v1/sandbox";
const tokens: string[] = [];
let serverOpen = true;

beforeAll(async () => {
  await remotes.create("acme", "widgets");
  const hooked = await remotes.create("acme", "hooked");
  // A remote that repeats the credential it was given in its refusal.
  await writeFile(
    join(hooked, "hooks", "pre-receive"),
    '#!/bin/sh\necho "presented $GW_TEST_PRESENTED_PASSWORD"\nexit 1\n',
    { mode: 0o755 },
  );
});

afterAll(async () => {
  if (serverOpen) await server.close();
  await remotes.remove();
});

/** A session of acme/<repository> cloned over HTTPS with a fresh token that the server accepts. */
async function setup(repository = "widgets") {
  const token = `ghp_${randomBytes(18).toString("hex")}`;
  tokens.push(token);
  server.password = token;
  const key = await stack.createKey();
  const user = "alice";
  const connection = (token: string) =>
    stack.call(key.secret, `${SANDBOX}/connections/github`, { method: "PUT", json: { token }, user });
  expect((await connection(token)).status).toBe(204);
  const created = await stack.call(key.secret, `${SANDBOX}/sessions`, {
    json: { owner: "acme", repository, repository_id: 9 },
    user,
  });
  expect(created.status).toBe(200);
  const session = await created.json();
  const call = (path: string, json?: unknown) =>
    stack.call(key.secret, `${SANDBOX}/sessions/${session.id}${path}`, { method: "POST", json, user });
  expect((await call("/assignments")).status).toBe(200);
  const push = (branch: string) => call("/github/push", { assignment_generation: 1, branch });
  return { token, session, push, connection, key, user };
}

interface ProcessInfo {
  pid: string;
  /** Its parent's pid. */
  ppid: string;
  cmdline: string;
  environ: string;
}

/** Every process this user can see, with its argument list and (where readable) its environment. */
async function processes(): Promise<ProcessInfo[]> {
  const pids = (await readdir("/proc")).filter((name) => /^\d+$/.test(name));
  const read = (pid: string, file: string) =>
    readFile(`/proc/${pid}/${file}`).then(
      (b) => b.toString().split("\0").join(" "),
      () => "",
    );
  return Promise.all(
    pids.map(async (pid) => ({
      pid,
      ppid: /^PPid:\s+(\d+)$/m.exec(await read(pid, "status"))?.[1] ?? "",
      cmdline: await read(pid, "cmdline"),
      environ: await read(pid, "environ"),
    })),
  );
}

/**
 * The token file named in the environment of the one process whose command line matches, among this
 * test's service's children (the service runs in this process): other files' pushes may run meanwhile.
 */
function tokenFileOf(seen: ProcessInfo[], command: RegExp): string {
  const [found] = seen.filter(
    (p) =>
      p.ppid === String(process.pid) && command.test(p.cmdline) && p.environ.includes("GW_GIT_TOKEN_FILE="),
  );
  expect(found).toBeDefined();
  return /GW_GIT_TOKEN_FILE=(\S+)/.exec(found!.environ)![1]!;
}

/** Holds the remote's next receive-pack until released: git is then mid-push, waiting for its answer. */
function holdReceivePack(): { atRemote: Promise<void>; release: () => void } {
  let arrived!: () => void;
  let release!: () => void;
  const atRemote = new Promise<void>((resolve) => (arrived = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  server.beforeReceivePack = async () => {
    arrived();
    await released;
  };
  return { atRemote, release };
}

describe("push over HTTPS with the stored connection", () => {
  it("hands the token to git's askpass only in a private file: never in an environment, an argument list, a URL or ps", async () => {
    const { token, push } = await setup();
    const { atRemote, release } = holdReceivePack();
    const pushing = push("watched");
    await atRemote;
    // git push and its HTTPS helper are running now, waiting for the remote's answer.
    const seen = await processes();
    const { stdout: ps } = await run("ps", ["-eww", "-o", "pid=,args="]);
    const file = tokenFileOf(seen, /^git push /);
    const whileRunning = { mode: (await stat(file)).mode & 0o777, content: await readFile(file, "utf8") };
    server.beforeReceivePack = undefined;
    release();
    const res = await pushing;

    const carrying = seen.filter((p) => p.environ.includes(`GW_GIT_TOKEN_FILE=${file}`));
    expect(carrying.map((p) => p.cmdline)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^git push /), expect.stringMatching(/remote-https /)]),
    );
    expect(whileRunning).toEqual({ mode: 0o600, content: `${token}\n` });
    expect(existsSync(file)).toBe(false);
    for (const p of seen) expect(p.environ).not.toContain(token);
    for (const p of seen) expect(p.cmdline).not.toContain(token);
    expect(ps).toMatch(/git push --porcelain/);
    expect(ps).not.toContain(token);
    expect(res.status).toBe(200);
    const receivePacks = server.requests.filter((r) => r.path === "/acme/widgets.git/git-receive-pack");
    expect(receivePacks.length).toBeGreaterThan(0);
    expect(receivePacks.every((r) => r.authorized)).toBe(true);
  });

  it("stops git when the caller goes away, and frees the session for the next push", async () => {
    const { push, session, key, user } = await setup();
    const { atRemote, release } = holdReceivePack();
    const caller = new AbortController();
    const abandoned = fetch(`${stack.gatewayUrl}${SANDBOX}/sessions/${session.id}/github/push`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key.secret}`,
        "x-on-behalf-of": user,
        "content-type": "application/json",
      },
      body: JSON.stringify({ assignment_generation: 1, branch: "abandoned" }),
      signal: caller.signal,
    }).catch((err: Error) => err.name);
    await atRemote;
    const file = tokenFileOf(await processes(), /^git push /);
    const carrying = async () =>
      (await processes()).filter((p) => p.environ.includes(`GW_GIT_TOKEN_FILE=${file}`));
    expect((await carrying()).length).toBeGreaterThan(0);
    caller.abort();
    expect(await abandoned).toBe("AbortError");
    let left = await carrying();
    for (const deadline = Date.now() + 10_000; left.length > 0 && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 50));
      left = await carrying();
    }
    expect(left).toEqual([]);
    server.beforeReceivePack = undefined;
    release();
    // The lock went with it: the next push runs at once.
    expect((await push("after-abandoned")).status).toBe(200);
  });

  it("answers 502 saying the remote refused the credential, in its own words", async () => {
    const { push, connection } = await setup();
    const wrong = `ghp_${randomBytes(18).toString("hex")}`;
    tokens.push(wrong);
    expect((await connection(wrong)).status).toBe(204);
    const res = await push("refused");
    expect(res.status).toBe(502);
    const body = await res.json();
    expect(body).toEqual({
      error: "Bad Gateway",
      message: "git push failed: the remote refused the credentials",
      code: "remote_failed",
    });
    expect(JSON.stringify(body)).not.toContain(wrong);
  });

  it("redacts the token from what the remote says when it refuses the push (409)", async () => {
    const { token, push } = await setup("hooked");
    const res = await push("echoed");
    expect(res.status).toBe(409);
    const { message } = await res.json();
    expect(message).toMatch(/\[remote rejected\] \(pre-receive hook declined\)/);
    expect(message).toMatch(/remote: presented \[redacted\]/);
    expect(message).not.toContain(token);
  });

  it("never logs a token", () => {
    const text = logs.join("");
    expect(text).toContain("session pushed");
    for (const token of tokens) expect(text).not.toContain(token);
  });

  it("answers 502 saying the remote could not be reached, without git's words", async () => {
    const { token, push } = await setup();
    await server.close();
    serverOpen = false;
    const res = await push("unreachable");
    expect(res.status).toBe(502);
    const body = await res.json();
    expect(body).toEqual({
      error: "Bad Gateway",
      message: "git push failed: the remote could not be reached",
      code: "remote_failed",
    });
    expect(JSON.stringify(body)).not.toContain(token);
    for (const t of tokens) expect(logs.join("")).not.toContain(t);
    await rm(remotes.root, { recursive: true, force: true });
  });
});
