// Session lifecycle (R-SES-1…4): admission against the concurrent-session limit, branch cutting,
// provisioning hand-off and stopping. Only PROVISIONING, RUNNING, STOPPED and FAILED are written.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type {
  Prisma,
  ProvisioningPhase,
  Session,
  SessionStatus,
  StopReason,
} from '../../prisma/generated/client/client';
import type { Db, FindManySql, RawSql } from '../platform';
import type { Logger } from '../platform';
import { type Settled, createKeyedBatcher } from '../batch';
import { assertCanReadSession, assertCanWriteSession, assertScope } from '../auth/authz';
import { BaseRefNotFoundError, ConflictError, NotFoundError, ValidationError } from '../errors';
import type { Events } from '../events/events';
import { GitBranchExistsError } from '../git/errors';
import type { GitService } from '../git/git';
import { repoRef, resolveProjectRef } from '../git/project-repo';
import { parseId } from '../ids';
import { LIVE_SESSION_STATUSES, sessionLimit } from '../accounts/limits';
import { type Principal, userOf } from '../auth/principal';
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
/** Most creates of one account admitted by one transaction. */
const ADMISSION_BATCH = 100;

export interface SessionLifecycleOptions {
  db: Db;
  /** The same database without Prisma (statements on hot paths). */
  sql: RawSql;
  /**
   * Reads a session page whose selection allows it as one statement (a fast path, see
   * server/fast-paths/README.md). @default none: Prisma reads every page
   */
  findManySql?: FindManySql;
  git: GitService;
  events: Events;
  logger: Logger;
  encryptionKey: Buffer;
  retryAfterSeconds: number;
  /** Bounds of the admission transaction (waiting for a connection / running); see env.ts. */
  transaction?: { maxWaitMs: number; timeoutMs: number };
  /** Counts refused creates (metrics). */
  onRefused?: () => void;
  /** Milliseconds since the epoch for the times it stamps; tests move it. @default Date.now */
  now?: () => number;
  /** Hands provisioning to the job queue (resolvers/sessions/provisioning.ts). */
  provision: (sessionId: string) => Promise<void>;
  /**
   * Writes each admitted session's provisioning job in the admission's own transaction
   * (resolvers/jobs/queue.ts): a crash at any point after the commit leaves a job that resumes the
   * session, never a reservation without one. `hold` runs before the transaction, `write` in it,
   * `drop` for the sessions not admitted, and `release` once the create is done with a session
   * (provision releases it too).
   */
  handoff?: {
    hold(sessionIds: string[]): Promise<void>;
    write(
      db: { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> },
      sessionIds: string[],
    ): Promise<void>;
    drop(sessionIds: string[]): Promise<void>;
    release(sessionId: string): Promise<unknown>;
  };
  /** Stops and releases the sandbox behind a session (resolvers/provisioning.ts). */
  teardown: (sessionId: string, reason: StopReason) => Promise<void>;
  /**
   * A create accepts the commit its base ref named this recently (SINGULACOMP_REF_CACHE_MS), so a
   * burst of creates asks the upstream once; 0 asks every time.
   */
  refCacheMs?: number;
  /**
   * Re-reads the project's manifest when its default branch moved to `commit` since it was read
   * (resolvers/projects/manifests.ts); resolves true when the templates were rewritten.
   */
  refreshManifest?: (
    project: { id: string; repositoryUrl: string; gitCredentialEnc: string | null },
    manifestCommit: string | null,
    commit: string,
  ) => Promise<boolean>;
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

/**
 * Moves a session still PROVISIONING on, to another phase or to RUNNING, and returns what its event
 * carries (the sandbox's status and runtime state included) in the same statement; no row when it
 * was not PROVISIONING. $2 status (null: unchanged), $3 startedAt (null: unchanged), $4 phase, $5 now.
 */
const ADVANCE_PROVISIONING = `UPDATE "Session" s SET
  "status" = COALESCE($2::text::"SessionStatus", s."status"),
  "startedAt" = COALESCE($3::timestamp(3), s."startedAt"),
  "provisioningPhase" = $4::text::"ProvisioningPhase",
  "updatedAt" = $5::timestamp(3)
WHERE s."id" = $1::uuid AND s."status" = 'PROVISIONING'
RETURNING s."id"::text AS "id", s."accountId"::text AS "accountId", s."status"::text AS "status",
  s."provisioningPhase"::text AS "provisioningPhase", s."stopReason"::text AS "stopReason",
  (SELECT jsonb_build_object('status', b."status", 'runtimeState', b."runtimeState")
     FROM "Sandbox" b WHERE b."sessionId" = s."id") AS "sandbox"`;

type AdvancedSession = {
  id: string;
  accountId: string;
  status: string;
  provisioningPhase: string | null;
  stopReason: string | null;
  sandbox: { status: string; runtimeState: string | null } | null;
};

type AccountLimitRow = {
  tier: 'FREE' | 'PRO' | 'TEAM' | 'ENTERPRISE';
  concurrentSessionLimit: number | null;
  live: number;
};

/** The account's row with the project, if it is the account's; the template's id if it exists. */
type CreateContextRow = AccountLimitRow & {
  projectAccountId: string | null;
  repositoryUrl: string;
  defaultBranch: string;
  gitCredentialEnc: string | null;
  manifestCommit: string | null;
  templateId: string | null;
};

/** $1 account, $2 project, $3 template slug (null: the project's default), $4 the live statuses. */
const READ_FOR_CREATE = `SELECT a."tier"::text AS "tier", a."concurrentSessionLimit",
  (SELECT count(*) FROM "Session" s
     WHERE s."accountId" = a."id" AND s."status" = ANY($4::text[]::"SessionStatus"[]))::int AS "live",
  p."accountId"::text AS "projectAccountId", p."repositoryUrl", p."defaultBranch", p."gitCredentialEnc",
  p."manifestCommit",
  (SELECT t."id"::text FROM "Template" t
     WHERE t."projectId" = p."id" AND (CASE WHEN $3::text IS NULL THEN t."isDefault" ELSE t."slug" = $3::text END)
     ORDER BY t."id" LIMIT 1) AS "templateId"
FROM "Account" a LEFT JOIN "Project" p ON p."id" = $2::uuid AND p."accountId" = a."id"
WHERE a."id" = $1::uuid`;

export function createSessionLifecycle(options: SessionLifecycleOptions) {
  const { db, git, events } = options;
  const log = options.logger.child({ module: 'session-lifecycle' });
  const now = options.now ?? Date.now;
  const transaction = options.transaction ?? { maxWaitMs: 5_000, timeoutMs: 5_000 };

  function refusal(limit: number, live: number): GraphQLError {
    options.onRefused?.();
    return concurrentSessionLimitError(limit, live, options.retryAfterSeconds);
  }

  /**
   * Ends a session that is in one of `from` and releases its lease, in one transaction: nobody reads
   * an ended session whose lease still looks held, and from the commit on a daemon's renewal is
   * refused. The lease is released only when this call ended the session (its own `stoppedAt`).
   * Returns whether it did; the teardown that follows releases the lease again, then a no-op.
   */
  async function endSession(
    sessionId: string,
    from: readonly SessionStatus[],
    data: { status: 'STOPPED' | 'FAILED'; stopReason: StopReason; stoppedAt: Date; failureReason?: string },
  ): Promise<boolean> {
    const [{ count }] = await db.$transaction([
      db.session.updateMany({ where: { id: sessionId, status: { in: [...from] } }, data }),
      db.executionLease.updateMany({
        where: { sessionId, releasedAt: null, session: { status: data.status, stoppedAt: data.stoppedAt } },
        data: { releasedAt: data.stoppedAt },
      }),
    ]);
    return count > 0;
  }

  /**
   * The authoritative check (R-SES-2): one short transaction per batch of an account's concurrent
   * creates holds the account row lock, which serialises admissions across server processes, counts
   * the live sessions and inserts as many of the batch as the limit leaves room for, in arrival
   * order; the rest are refused. N parallel creates against a limit of L admit exactly L, in about
   * N / batch transactions instead of N, and a burst never holds more than one pooled connection
   * per account while it waits.
   */
  const admitBatch = createKeyedBatcher<Prisma.SessionCreateManyInput, Session>(
    async (accountId, rows) => {
      const ids = rows.flatMap((row) => row.id ?? []);
      const handoff = options.handoff;
      await handoff?.hold(ids);
      const admittedIds = new Set<string>();
      try {
        const settled = await admit(accountId, rows);
        for (const s of settled) if (s.ok) admittedIds.add(s.value.id);
        return settled;
      } finally {
        await handoff?.drop(ids.filter((id) => !admittedIds.has(id)));
      }
    },
    { maxBatch: ADMISSION_BATCH },
  );

  function admit(accountId: string, rows: Prisma.SessionCreateManyInput[]): Promise<Settled<Session>[]> {
    return db.$transaction(
      async (tx) => {
        const [account] = await tx.$queryRaw<Omit<AccountLimitRow, 'live'>[]>`
            SELECT "tier", "concurrentSessionLimit" FROM "Account" WHERE "id" = ${accountId}::uuid FOR UPDATE`;
        if (!account) return rows.map(() => ({ ok: false, error: new NotFoundError('Account not found.') }));
        const limit = sessionLimit(account);
        const live = await tx.session.count({
          where: { accountId, status: { in: [...LIVE_SESSION_STATUSES] } },
        });
        const admitted = rows.slice(0, Math.max(0, limit - live));
        const created = new Map(
          admitted.length === 0
            ? []
            : (await tx.session.createManyAndReturn({ data: admitted })).map((row) => [row.id, row]),
        );
        if (created.size > 0 && options.handoff) {
          const executeSql = async (text: string, values: unknown[] = []) => ({
            rows: await tx.$queryRawUnsafe<unknown[]>(text, ...values),
          });
          await options.handoff.write({ executeSql }, [...created.keys()]);
        }
        return rows.map((row): Settled<Session> => {
          const session = row.id === undefined ? undefined : created.get(row.id);
          return session
            ? { ok: true, value: session }
            : { ok: false, error: refusal(limit, live + admitted.length) };
        });
      },
      { maxWait: transaction.maxWaitMs, timeout: transaction.timeoutMs },
    );
  }

  /**
   * What a create needs before any git work, in one statement: the project (only if it is the
   * account's), the template it names (the project's default without a slug), and the account's
   * limit with its live sessions, read to refuse a create when the account is already full: a cheap
   * unlocked count that can only over-count (a concurrent stop), never admit, so a burst's refusals
   * never wait behind git or the admissions ahead of them. The locked check above decides.
   */
  async function readForCreate(
    accountId: string,
    projectId: string,
    slug: string | null,
  ): Promise<CreateContextRow | undefined> {
    const [row] = await options.sql.query<CreateContextRow>(
      READ_FOR_CREATE,
      [accountId, projectId, slug, [...LIVE_SESSION_STATUSES]],
      { prepared: 'session-read-for-create' },
    );
    return row;
  }

  /** One statement writes the change and reads what its event carries; then the event. */
  async function advanceProvisioning(
    sessionId: string,
    change: { running: boolean; phase: ProvisioningPhase | null },
  ): Promise<boolean> {
    const at = new Date(now()).toISOString();
    const [session] = await options.sql.query<AdvancedSession>(
      ADVANCE_PROVISIONING,
      [
        sessionId,
        change.running ? 'RUNNING' : null,
        change.running ? at : null,
        change.phase,
        new Date().toISOString(),
      ],
      { prepared: 'session-advance-provisioning' },
    );
    if (!session) return false;
    if (typeof session.sandbox === 'string') session.sandbox = JSON.parse(session.sandbox);
    await events.session(session);
    return true;
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

    /** The session by id or null, no read check (`query`: the GraphQL selection); callers check. */
    find<Q extends object>(id: string, query?: Q) {
      return db.session.findUnique({ ...(query ?? {}), where: { id } });
    },

    /** As `find`, for a session known to exist (an event's): throws when it is gone. */
    get<Q extends object>(id: string, query?: Q) {
      return db.session.findUniqueOrThrow({ ...(query ?? {}), where: { id } });
    },

    /**
     * The principal's account's sessions, newest first; `query` is the Prisma selection the GraphQL
     * connection needs. The account filter is the tenancy rule of every session list. A selection of
     * scalars and to-one relations runs as one SQL statement when `findManySql` is given.
     */
    async list<Q extends { select?: unknown; include?: unknown }>(
      principal: Principal,
      filter: { status?: SessionStatus; projectId?: string },
      query: Q,
    ): Promise<Session[]> {
      const where = { accountId: principal.accountId, ...filter };
      const orderBy = [{ createdAt: 'desc' }, { id: 'desc' }] as const;
      const rows = options.findManySql?.('Session', { where, orderBy, query });
      if (rows) return (await rows) as unknown as Session[];
      return db.session.findMany({ ...(query as object), where, orderBy: [...orderBy] });
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
      const givenRef = input.baseRef ? requireRefName(input.baseRef, ['input', 'baseRef']) : null;
      const slug = input.templateSlug
        ? requireNoNul(input.templateSlug, ['input', 'templateSlug']).slice(0, 200)
        : null;
      // Verdicts in the order a caller fixes them: the project, then the template, then the limit.
      const context = await readForCreate(principal.accountId, projectId, slug);
      const project = context?.projectAccountId ? context : null;
      if (!project) {
        throw new NotFoundError('No project with that id in your account.', ['input', 'projectId']);
      }
      const baseRef = givenRef ?? project.defaultBranch;
      const repo = repoRef(project, options.encryptionKey);
      /** When the default branch moved since the manifest was read, re-reads it and the template. */
      const refreshTemplate = async (defaultCommit: string): Promise<void> => {
        if (!options.refreshManifest || project.manifestCommit === null) return;
        const refreshed = await options.refreshManifest(
          { id: projectId, repositoryUrl: project.repositoryUrl, gitCredentialEnc: project.gitCredentialEnc },
          project.manifestCommit,
          defaultCommit,
        );
        if (!refreshed) return;
        project.manifestCommit = defaultCommit;
        project.templateId = (await readForCreate(principal.accountId, projectId, slug))?.templateId ?? null;
      };
      if (slug && !project.templateId && project.manifestCommit !== null) {
        // A template added upstream since the manifest was read (a fresh answer: this is the refusal path).
        const head = await resolveProjectRef(git, repo, project.defaultBranch);
        if (head) await refreshTemplate(head);
      }
      if (slug && !project.templateId) {
        throw new NotFoundError(
          `Template "${input.templateSlug}" is not defined for this project: templates come from singulacomp.yaml on its default branch (to read another ref, syncProjectManifest or \`singulacomp projects sync <project> --ref <ref>\`).`,
          ['input', 'templateSlug'],
        );
      }
      const limit = sessionLimit(project);
      if (project.live >= limit) throw refusal(limit, project.live);

      // Once admitted, this create cuts a branch: a push of the repository about to start waits
      // briefly for it (GitService.expectCut), so a burst's creates share one push.
      const ticket = git.expectCut(repo);
      try {
        const baseCommit = await resolveProjectRef(git, repo, baseRef, { maxAgeMs: options.refCacheMs ?? 0 });
        if (!baseCommit) {
          throw new BaseRefNotFoundError(`"${baseRef}" does not exist in the project's repository.`, [
            'input',
            'baseRef',
          ]);
        }
        if (baseRef === project.defaultBranch) await refreshTemplate(baseCommit);
        // The locked admission inserts the session with its base commit: a create refused for its
        // input has written nothing.
        const sessionId = randomUUID();
        const session = await admitBatch(principal.accountId, {
          id: sessionId,
          accountId: principal.accountId,
          projectId,
          userId: userOf(principal),
          templateId: project.templateId,
          agent,
          status: 'PROVISIONING',
          branchName: sessionId,
          baseRef,
          baseCommit,
          prompt,
          turnLedgerId: randomUUID(),
        });
        // Its provisioning job was written with it and waits for this create: released whatever
        // happens from here (provision releases it on success; a failed session's job finds it
        // FAILED and does nothing).
        let handedOff = false;
        try {
          // The branch is cut while the event is written; the outcome is handled once both are done,
          // so a failure's event always follows this one. No sandbox yet: the event says so, whatever
          // exists when a subscriber resolves it.
          const cut = git.cutBranch(repo, baseCommit, session.branchName, ticket);
          cut.catch(() => {}); // handled below, after the event
          await events.session({ ...session, sandbox: null });
          log.info({ sessionId, projectId, baseRef, baseCommit }, 'session created');

          try {
            await cut;
          } catch (error) {
            if (error instanceof GitBranchExistsError) {
              // Named after the session, the branch can only have been cut by its own provisioning
              // job: it was taken over while this push waited, and that job goes on.
              log.info({ sessionId }, 'branch already cut by a resumed provisioning job');
              return session;
            }
            const reason = `Could not create branch ${session.branchName}: ${(error as Error).message}`;
            log.warn({ sessionId, err: error }, 'branch cut failed');
            return await this.fail(session.id, reason);
          }
          await options.provision(session.id);
          handedOff = true;
          return session;
        } finally {
          if (!handedOff) {
            await options.handoff?.release(session.id).catch((error: unknown) => {
              log.warn({ sessionId, err: error }, 'could not release the provisioning job');
            });
          }
        }
      } finally {
        ticket(); // refused or failed before its cut
      }
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
      const ended = await endSession(sessionId, onlyFrom, {
        status: 'FAILED',
        failureReason: reason.slice(0, 2_000),
        stopReason: 'FAILED',
        stoppedAt: new Date(now()),
      });
      if (!ended) return db.session.findUniqueOrThrow({ where: { id: sessionId } });
      log.info({ sessionId, reason: reason.slice(0, 2_000) }, 'session failed');
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
      const ended = await endSession(sessionId, LIVE_SESSION_STATUSES, {
        status: 'STOPPED',
        stopReason: reason,
        stoppedAt: new Date(now()),
      });
      if (!ended) return null;
      log.info({ sessionId, stopReason: reason }, 'session stopped');
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

    /** PROVISIONING → RUNNING, its provisioning phase cleared; false when the session was not PROVISIONING. */
    markRunning(sessionId: string): Promise<boolean> {
      return advanceProvisioning(sessionId, { running: true, phase: null });
    },

    /**
     * Shows what a PROVISIONING session waits for (published like any other session change).
     * Returns false when the session is no longer PROVISIONING (a stop won): nothing was changed.
     */
    setPhase(sessionId: string, phase: ProvisioningPhase | null): Promise<boolean> {
      return advanceProvisioning(sessionId, { running: false, phase });
    },
  };
}
