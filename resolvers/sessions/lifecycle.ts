// Session lifecycle (R-SES-1…4): admission against the concurrent-session limit, branch cutting,
// provisioning hand-off and stopping. Only PROVISIONING, RUNNING, STOPPED and FAILED are written.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type { Session, SessionStatus, StopReason } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import { assertCanReadSession, assertCanWriteSession, assertScope } from '../auth/authz';
import { decrypt } from '../auth/crypto';
import {
  BaseRefNotFoundError,
  ConflictError,
  NotFoundError,
  RepositoryUnreachableError,
  ValidationError,
} from '../errors';
import type { Events } from '../events/events';
import type { GitService, RepoRef } from '../git/git';
import { parseId } from '../ids';
import { LIVE_SESSION_STATUSES, sessionLimit } from '../accounts/limits';
import type { Principal } from '../auth/principal';
import { requireNoNul, requireRefName, requireText } from '../validate';

export interface CreateSessionInput {
  projectId: string;
  baseRef?: string | null;
  templateSlug?: string | null;
  prompt?: string | null;
  agent?: string | null;
}

export const MAX_PROMPT_LENGTH = 100_000;
const AGENT_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export interface SessionLifecycleOptions {
  db: Db;
  git: GitService;
  events: Events;
  logger: Logger;
  encryptionKey: Buffer;
  retryAfterSeconds: number;
  /** Bounds of the admission transaction (waiting for a connection / running); see env.ts. */
  transaction?: { maxWaitMs: number; timeoutMs: number };
  /** Counts refused creates (metrics). */
  onRefused?: () => void;
  /** Hands provisioning to the job queue (resolvers/sessions/provisioning.ts). */
  provision: (sessionId: string) => Promise<void>;
  /** Stops and releases the sandbox behind a session (resolvers/provisioning.ts). */
  teardown: (sessionId: string, reason: StopReason) => Promise<void>;
}

export type SessionLifecycle = ReturnType<typeof createSessionLifecycle>;

export function concurrentSessionLimitError(
  limit: number,
  count: number,
  retryAfterSeconds: number,
): GraphQLError {
  return new GraphQLError(
    `Concurrent session limit reached: ${count} of ${limit} sessions are live. Stop a session or raise the account's limit.`,
    {
      extensions: {
        code: 'CONCURRENT_SESSION_LIMIT',
        limit,
        count,
        http: { status: 429, headers: { 'Retry-After': String(retryAfterSeconds) } },
      },
    },
  );
}

export function repoRef(
  project: { repositoryUrl: string; gitCredentialEnc: string | null },
  encryptionKey: Buffer,
): RepoRef {
  return {
    url: project.repositoryUrl,
    credential: project.gitCredentialEnc ? decrypt(encryptionKey, project.gitCredentialEnc) : null,
  };
}

/** The commit `ref` names in the project's repository (null: no such ref); unreachable → typed error. */
export async function resolveProjectRef(git: GitService, repo: RepoRef, ref: string): Promise<string | null> {
  try {
    return await git.resolveRef(repo, ref);
  } catch (error) {
    throw new RepositoryUnreachableError(
      `Cannot read the project's repository: ${(error as Error).message}`,
      ['input', 'projectId'],
    );
  }
}

/**
 * Runs tasks one at a time per key inside this process. Concurrent creates for one account queue
 * here instead of each holding a pooled connection while it waits for the account row lock: a
 * burst of hundreds of creates would otherwise exhaust the pool and time out (INTERNAL errors).
 */
export function createKeyedQueue() {
  const tails = new Map<string, Promise<unknown>>();
  return function run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return result;
  };
}

type AccountLimitRow = {
  tier: 'FREE' | 'PRO' | 'TEAM' | 'ENTERPRISE';
  concurrentSessionLimit: number | null;
  live: number;
};

export function createSessionLifecycle(options: SessionLifecycleOptions) {
  const { db, git, events } = options;
  const log = options.logger.child({ module: 'session-lifecycle' });
  const admissionQueue = createKeyedQueue();
  const transaction = options.transaction ?? { maxWaitMs: 5_000, timeoutMs: 5_000 };

  function refuse(limit: number, live: number): never {
    options.onRefused?.();
    throw concurrentSessionLimitError(limit, live, options.retryAfterSeconds);
  }

  /**
   * Admits one session against the account's limit (R-SES-2). A cheap unlocked count refuses first:
   * it can only over-count (a concurrent stop), never admit. The authoritative check runs in a short
   * transaction holding the account row lock, which serialises admissions across server processes,
   * so N parallel creates against a limit of L admit exactly L. The cheap check runs before the
   * account's in-process queue as well as inside it, so a burst's refusals never wait behind the
   * admissions queued ahead of them.
   */
  async function admit(
    principal: Principal,
    data: Parameters<Db['session']['create']>[0]['data'],
  ): Promise<Session> {
    const refuseIfFull = async (): Promise<void> => {
      const [cheap] = await db.$queryRaw<AccountLimitRow[]>`
        SELECT a."tier", a."concurrentSessionLimit",
          (SELECT count(*) FROM "Session" s WHERE s."accountId" = a."id"
             AND s."status" IN ('PROVISIONING', 'RUNNING'))::int AS "live"
        FROM "Account" a WHERE a."id" = ${principal.accountId}::uuid`;
      if (!cheap) throw new NotFoundError('Account not found.');
      const cheapLimit = sessionLimit(cheap);
      if (cheap.live >= cheapLimit) refuse(cheapLimit, cheap.live);
    };
    await refuseIfFull();
    return admissionQueue(principal.accountId, async () => {
      await refuseIfFull();
      return db.$transaction(
        async (tx) => {
          const [account] = await tx.$queryRaw<Omit<AccountLimitRow, 'live'>[]>`
            SELECT "tier", "concurrentSessionLimit" FROM "Account" WHERE "id" = ${principal.accountId}::uuid FOR UPDATE`;
          if (!account) throw new NotFoundError('Account not found.');
          const limit = sessionLimit(account);
          const live = await tx.session.count({
            where: { accountId: principal.accountId, status: { in: [...LIVE_SESSION_STATUSES] } },
          });
          if (live >= limit) refuse(limit, live);
          return tx.session.create({ data });
        },
        { maxWait: transaction.maxWaitMs, timeout: transaction.timeoutMs },
      );
    });
  }

  /** Gives a reserved slot back: the create failed on input the caller can fix; nothing was published. */
  async function release(sessionId: string): Promise<void> {
    await db.session.delete({ where: { id: sessionId } }).catch((error: unknown) => {
      log.error({ sessionId, err: error }, 'could not release a reserved session slot');
    });
  }

  async function loadSessionFor(principal: Principal, id: string): Promise<Session> {
    const sessionId = parseId(id, 'Session', ['input', 'sessionId']);
    const session = await db.session.findUnique({ where: { id: sessionId } });
    if (!session) throw new NotFoundError('No session with that id.', ['input', 'sessionId']);
    assertCanReadSession(principal, session);
    return session;
  }

  return {
    loadSessionFor,

    /**
     * The principal's account's sessions, newest first; `query` is the Prisma selection the GraphQL
     * connection needs. The account filter is the tenancy rule of every session list.
     */
    list<Q extends { select?: unknown; include?: unknown }>(
      principal: Principal,
      filter: { status?: SessionStatus; projectId?: string },
      query: Q,
    ) {
      return db.session.findMany({
        ...(query as object),
        where: { accountId: principal.accountId, ...filter },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
    },

    async create(principal: Principal, input: CreateSessionInput): Promise<Session> {
      assertScope(principal, 'sessions:write');
      const projectId = parseId(input.projectId, 'Project', ['input', 'projectId']);
      const prompt = input.prompt == null ? null : requireNoNul(input.prompt, ['input', 'prompt']);
      if (prompt !== null && prompt.length > MAX_PROMPT_LENGTH) {
        throw new ValidationError(`prompt must be at most ${MAX_PROMPT_LENGTH} characters.`, [
          'input',
          'prompt',
        ]);
      }
      const agent = input.agent
        ? requireText(input.agent, ['input', 'agent'], {
            max: 64,
            pattern: AGENT_NAME,
            hint: 'agent must be lowercase letters, digits, "-" or "_".',
          })
        : 'build';
      const project = await db.project.findUnique({ where: { id: projectId } });
      if (!project || project.accountId !== principal.accountId) {
        throw new NotFoundError('No project with that id in your account.', ['input', 'projectId']);
      }
      const baseRef = input.baseRef
        ? requireRefName(input.baseRef, ['input', 'baseRef'])
        : project.defaultBranch;
      let template = null;
      if (input.templateSlug) {
        template = await db.template.findUnique({
          where: {
            projectId_slug: {
              projectId,
              slug: requireNoNul(input.templateSlug, ['input', 'templateSlug']).slice(0, 200),
            },
          },
        });
        if (!template) {
          throw new NotFoundError(
            `Template "${input.templateSlug}" is not defined for this project; run syncProjectManifest first.`,
            ['input', 'templateSlug'],
          );
        }
      } else {
        template = await db.template.findFirst({ where: { projectId, isDefault: true } });
      }

      const sessionId = randomUUID();
      // Admission first: a refused create never waits behind git, provider or snapshot work. The
      // slot is reserved (a PROVISIONING row without a base commit) before the ref is resolved, and
      // given back if the ref turns out not to exist.
      const reserved = await admit(principal, {
        id: sessionId,
        accountId: principal.accountId,
        projectId,
        userId: principal.kind === 'USER' ? principal.userId : null,
        templateId: template?.id ?? null,
        agent,
        status: 'PROVISIONING',
        branchName: sessionId,
        baseRef,
        prompt,
        turnLedgerId: randomUUID(),
      });

      const repo = repoRef(project, options.encryptionKey);
      let baseCommit: string | null;
      try {
        baseCommit = await resolveProjectRef(git, repo, baseRef);
      } catch (error) {
        await release(reserved.id);
        throw error;
      }
      if (!baseCommit) {
        await release(reserved.id);
        throw new BaseRefNotFoundError(`"${baseRef}" does not exist in the project's repository.`, [
          'input',
          'baseRef',
        ]);
      }
      const session = await db.session.update({ where: { id: reserved.id }, data: { baseCommit } });
      // No sandbox yet: the event says so, whatever exists when a subscriber resolves it.
      await events.session({ ...session, sandbox: null });

      try {
        await git.cutBranch(repo, baseCommit, session.branchName);
      } catch (error) {
        const reason = `Could not create branch ${session.branchName}: ${(error as Error).message}`;
        log.warn({ sessionId, err: error }, 'branch cut failed');
        return this.fail(session.id, reason);
      }
      await options.provision(session.id);
      return session;
    },

    /**
     * Moves a live session to FAILED with a reason (provisioning errors, provider outages).
     * `onlyFrom` narrows which statuses may fail (the recovery sweep fails PROVISIONING only).
     */
    async fail(
      sessionId: string,
      reason: string,
      onlyFrom: ReadonlyArray<'PROVISIONING' | 'RUNNING'> = LIVE_SESSION_STATUSES,
    ): Promise<Session> {
      const now = new Date();
      const { count } = await db.session.updateMany({
        where: { id: sessionId, status: { in: [...onlyFrom] } },
        data: {
          status: 'FAILED',
          failureReason: reason.slice(0, 2_000),
          stopReason: 'FAILED',
          stoppedAt: now,
        },
      });
      if (count === 0) return db.session.findUniqueOrThrow({ where: { id: sessionId } });
      await options.teardown(sessionId, 'FAILED').catch((error: unknown) => {
        log.warn({ sessionId, err: error }, 'teardown after failure did not complete');
      });
      // Published after the teardown, so the event shows the sandbox as the caller sees it.
      const session = await db.session.findUniqueOrThrow({
        where: { id: sessionId },
        include: { sandbox: true },
      });
      await events.session(session);
      return session;
    },

    async stop(principal: Principal, input: { sessionId: string }): Promise<Session> {
      const session = await loadSessionFor(principal, input.sessionId);
      assertCanWriteSession(principal, session);
      const stopped = await this.stopInternal(session.id, 'USER');
      if (!stopped) {
        throw new ConflictError(`Session is already ${session.status}.`, ['input', 'sessionId']);
      }
      return stopped;
    },

    /**
     * Stops a live session for a reason; returns null when it was not live (another actor won).
     * `where` narrows the transition further (the reaper passes its fencing condition).
     */
    async stopInternal(sessionId: string, reason: StopReason): Promise<Session | null> {
      const now = new Date();
      const { count } = await db.session.updateMany({
        where: { id: sessionId, status: { in: [...LIVE_SESSION_STATUSES] } },
        data: { status: 'STOPPED', stopReason: reason, stoppedAt: now },
      });
      if (count === 0) return null;
      await options.teardown(sessionId, reason).catch((error: unknown) => {
        log.warn({ sessionId, err: error }, 'teardown did not complete');
      });
      // Published after the teardown: the STOPPED event and stopSession's answer show the same
      // sandbox (DESTROYED), live and replayed.
      const session = await db.session.findUniqueOrThrow({
        where: { id: sessionId },
        include: { sandbox: true },
      });
      await events.session(session);
      return session;
    },

    async markRunning(sessionId: string): Promise<void> {
      const { count } = await db.session.updateMany({
        where: { id: sessionId, status: 'PROVISIONING' },
        data: { status: 'RUNNING', startedAt: new Date() },
      });
      if (count > 0)
        await events.session(
          await db.session.findUniqueOrThrow({ where: { id: sessionId }, include: { sandbox: true } }),
        );
    },
  };
}
