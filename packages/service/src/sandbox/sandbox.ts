import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Vault } from "@gw/core/mcp";
import type { Queryable } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import { commitWorkingTree, openCheckout } from "./checkout.ts";
import type { SandboxOptions } from "./config.ts";
import { ConnectionStore, legacyConnectionKey } from "./connections.ts";
import { Git } from "./git.ts";
import {
  cloneRepository,
  PushRejected,
  pushCommit,
  RemoteFailed,
  remoteBranchHead,
  remoteFailure,
} from "./remote.ts";
import { SessionLocks } from "./session-lock.ts";
import { newSessionId, type Session, SessionStore } from "./sessions.ts";

/** `GitHubPushRequest` (API reference §2.2, see docs/api/README.md), validated. */
export interface PushRequest {
  assignment_generation: number;
  branch: string;
  checkout_path: string;
  force: boolean;
}

/** `GitHubPushResult` (API reference §2.3): every field, in the reference's order. */
export interface GitHubPushResult {
  session_id: string;
  assignment_generation: number;
  repository_id: number;
  owner: string;
  repository: string;
  branch: string;
  remote_head_sha: string;
  no_changes: boolean;
}

export interface NewSession {
  owner: string;
  repository: string;
  repository_id: number;
  ref: string | undefined;
}

/** Points inside a push where tests force an interleaving. */
export interface SandboxHooks {
  /** A push found its session locked by another one and is waiting. */
  lockBusy?(sessionId: string): void | Promise<void>;
  /** A push holds its session's lock and passed the fencing check; it has not touched the workspace yet. */
  lockHeld?(sessionId: string): void | Promise<void>;
}

export class StaleAssignment extends AppError {
  constructor(given: number, current: number) {
    super(
      "conflict",
      `assignment_generation ${given} is not the session's current assignment; the current assignment_generation is ${current}`,
      { reason: "stale_assignment" },
    );
    this.name = "StaleAssignment";
  }
}

/** Lifetime of a session lock in Redis; it is extended while a push runs. */
const LOCK_TTL_MS = 15_000;

const lockKey = (org: string, id: string) => `gw:sandbox:lock:{${org}}:${id}`;

/**
 * Sandbox sessions: each a clone of one repository in its own workspace
 * (`<root>/<session_id>`), owned by the principal that created it, pushed
 * with that principal's stored connection, one push at a time, fenced by the
 * session's assignment generation.
 */
export class Sandbox {
  readonly connections: ConnectionStore;
  readonly sessions: SessionStore;
  readonly git: Git;
  private readonly locks: SessionLocks;
  private readonly options: SandboxOptions;
  private readonly logger: Logger;
  private readonly hooks: SandboxHooks;
  private readonly clock: Clock;

  private constructor(
    parts: {
      connections: ConnectionStore;
      sessions: SessionStore;
      git: Git;
      locks: SessionLocks;
      clock: Clock;
    },
    options: SandboxOptions,
    logger: Logger,
    hooks: SandboxHooks,
  ) {
    this.connections = parts.connections;
    this.sessions = parts.sessions;
    this.git = parts.git;
    this.locks = parts.locks;
    this.clock = parts.clock;
    this.options = options;
    this.logger = logger;
    this.hooks = hooks;
  }

  static async create(
    options: SandboxOptions,
    stores: { redis: RedisClient; db: Queryable; clock: Clock; vault: Vault },
    logger: Logger,
    hooks: SandboxHooks = {},
  ): Promise<Sandbox> {
    const { redis, db, clock, vault } = stores;
    await mkdir(options.root, { recursive: true, mode: 0o700 });
    await mkdir(options.repositories, { recursive: true, mode: 0o700 });
    const legacyKey = await legacyConnectionKey(options.connectionKey, options.dataDir);
    const git = await Git.create({
      baseUrl: options.baseUrl,
      timeoutMs: options.gitTimeoutMs,
      caFile: options.caFile,
    });
    const locks = new SessionLocks(redis, { ttlMs: LOCK_TTL_MS, waitMs: options.pushWaitMs }, clock);
    return new Sandbox(
      {
        connections: new ConnectionStore(db, vault, { clock, legacyKey }),
        sessions: new SessionStore(db),
        git,
        locks,
        clock,
      },
      options,
      logger,
      hooks,
    );
  }

  /** Where session `id`'s files are: the working tree of its repository, the agent's to change. */
  workspace(id: string): string {
    return join(this.options.root, id);
  }

  /** Session `id`'s repository (its git directory), which only the service writes. */
  repository(id: string): string {
    return join(this.options.repositories, `${id}.git`);
  }

  async createSession(principal: Principal, input: NewSession, signal?: AbortSignal): Promise<Session> {
    const token = await this.connections.token(principal);
    const session: Session = {
      id: newSessionId(),
      object: "sandbox.session",
      owner: input.owner,
      repository: input.repository,
      repository_id: input.repository_id,
      assignment_generation: 0,
      created_at: Math.floor(this.clock.wall() / 1000),
    };
    const workspace = this.workspace(session.id);
    const gitDir = this.repository(session.id);
    try {
      await cloneRepository(this.git, {
        url: this.git.repositoryUrl(input.owner, input.repository),
        gitDir,
        workspace,
        ref: input.ref,
        token,
        ...(signal ? { signal } : {}),
      });
      await this.sessions.create(principal, session);
    } catch (err) {
      await rm(workspace, { recursive: true, force: true });
      await rm(gitDir, { recursive: true, force: true });
      throw remoteFailure(err, {
        operation: "clone",
        token,
        signal,
        timeoutMs: this.options.gitTimeoutMs,
        logger: this.logger,
      });
    }
    this.logger.info(
      { sessionId: session.id, owner: input.owner, repository: input.repository },
      "session created",
    );
    return session;
  }

  /** Removes the session and its workspace, after any push of it in progress. */
  async deleteSession(principal: Principal, id: string, signal?: AbortSignal): Promise<void> {
    await this.sessions.get(principal, id);
    await this.locks.withLock(lockKey(principal.org, id), signal ? { signal } : {}, async () => {
      await this.sessions.delete(principal, id);
      await rm(this.workspace(id), { recursive: true, force: true });
      await rm(this.repository(id), { recursive: true, force: true });
    });
  }

  /**
   * Commits the working tree at `checkout_path` and pushes HEAD to
   * `refs/heads/<branch>` of the session's repository, holding the session's
   * lock throughout, so two pushes of one session never overlap on any
   * replica. The generation is checked again once the lock is held: a push of
   * an assignment that was superseded while it waited does not run.
   */
  async push(
    principal: Principal,
    id: string,
    request: PushRequest,
    signal: AbortSignal,
  ): Promise<GitHubPushResult> {
    const fence = (session: Session) => {
      if (session.assignment_generation !== request.assignment_generation) {
        throw new StaleAssignment(request.assignment_generation, session.assignment_generation);
      }
    };
    fence(await this.sessions.get(principal, id));
    const token = await this.connections.token(principal);
    const onBusy = () => this.hooks.lockBusy?.(id);
    return this.locks.withLock(lockKey(principal.org, id), { signal, onBusy }, async (lost) => {
      const session = await this.sessions.get(principal, id);
      fence(session);
      await this.hooks.lockHeld?.(id);
      const abort = AbortSignal.any([signal, lost]);
      const url = this.git.repositoryUrl(session.owner, session.repository);
      const timeout = this.options.gitTimeoutMs;
      try {
        const checkout = await openCheckout(this.repository(id), this.workspace(id), request.checkout_path);
        const message = `Sandbox session ${id}, assignment ${session.assignment_generation}`;
        const { head, committed } = await commitWorkingTree(
          this.git,
          checkout,
          { message, author: this.options.author },
          abort,
        );
        const pushed = await pushCommit(
          this.git,
          { checkout, url, sha: head, branch: request.branch, force: request.force, token },
          abort,
        );
        const remoteHead = await remoteBranchHead(this.git, { url, branch: request.branch, token }, abort);
        if (!remoteHead)
          throw new RemoteFailed(
            "ls-remote",
            `the remote shows no branch '${request.branch}' after the push`,
          );
        const result: GitHubPushResult = {
          session_id: id,
          assignment_generation: session.assignment_generation,
          repository_id: session.repository_id,
          owner: session.owner,
          repository: session.repository,
          branch: request.branch,
          remote_head_sha: remoteHead,
          no_changes: !committed && pushed === "up_to_date",
        };
        this.logger.info(
          {
            sessionId: id,
            generation: result.assignment_generation,
            branch: request.branch,
            sha: remoteHead,
            committed,
          },
          "session pushed",
        );
        return result;
      } catch (err) {
        if (err instanceof PushRejected)
          this.logger.info({ sessionId: id, err: err.message }, "push refused");
        throw remoteFailure(err, {
          operation: "push",
          token,
          signal: abort,
          timeoutMs: timeout,
          logger: this.logger,
        });
      }
    });
  }

  async close(): Promise<void> {
    await this.git.close();
  }
}
