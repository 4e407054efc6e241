// Durable background work (provisioning, teardown retries, the idle reaper's tick) on pg-boss: jobs live in PostgreSQL
// (schema `pgboss`), survive a process crash, retry with backoff, and each runs on one process of
// the fleet at a time. A worker that dies stops heart-beating; pg-boss's monitor then hands the job
// to another process (or retries it here after a restart) within `heartbeatSeconds` plus one
// monitor pass. On the embedded default the queue runs on the same PGlite instance
// (pg-boss's own adapter), so a restart resumes what the previous run left. See
// docs/background-jobs.md for why pg-boss and not graphile-worker.
import { randomUUID } from 'node:crypto';
import { type Job, PgBoss, fromPglite } from 'pg-boss';
import { createKeyedBatcher } from '../batch';
import type { PGlite } from '@electric-sql/pglite';
import { type Database, type Logger, PROCESS_LOCK_SPACE } from '../platform';

export const JOBS = {
  provision: 'session-provision',
  teardown: 'session-teardown',
  reaper: 'idle-reaper',
} as const;

export type JobName = (typeof JOBS)[keyof typeof JOBS];

/**
 * Queues that differ from the per-session default (stately: one queued and one running attempt per
 * session). The reaper's tick is fleet-wide: `exclusive` keeps one job queued or running across
 * every process, and a failed tick is not retried (the next one is due within an interval anyway).
 */
const QUEUE_OVERRIDES: Partial<
  Record<JobName, { policy: 'exclusive'; retryLimit: number; deleteAfterSeconds: number }>
> = {
  // A tick every 30 s: finished ones are kept an hour, not pg-boss's default week.
  [JOBS.reaper]: { policy: 'exclusive', retryLimit: 0, deleteAfterSeconds: 3_600 },
};

export interface ProvisionJob {
  sessionId: string;
  /**
   * Set by the recovery sweep: the session's branch may not have been cut yet, so the job cuts it
   * (the creating process cuts it before it sends its own job).
   */
  cutBranch?: boolean;
  /** The request that created the session: the attempt's log lines carry it. */
  requestId?: string;
}

export interface TeardownJob {
  sessionId: string;
  reason: string;
}

export interface JobQueueOptions {
  database: Database;
  logger: Logger;
  /**
   * A job whose worker has not heart-beaten for this long is taken over (owner died).
   * pg-boss's minimum is 10. @default 10
   */
  heartbeatSeconds?: number;
  /** Attempts after the first. @default 4 */
  retryLimit?: number;
  /** Poll interval of this process's workers. @default 1 */
  pollingIntervalSeconds?: number;
  /** Jobs of one kind this process runs at once. @default 4 */
  concurrency?: number;
  /**
   * A provisioning job written with its session's admission waits for its creator to release it
   * (once the branch is cut); if neither that nor its creator's death is seen, it starts after
   * this long anyway. @default 30_000
   */
  holdMs?: number;
  /** How often this process looks for jobs whose owning process is gone. @default 1_000 */
  orphanCheckMs?: number;
}

/** What writes a job inside the caller's transaction (pg-boss's `db` option). */
export interface JobSqlExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

export interface JobStatus {
  id: string;
  state: 'created' | 'retry' | 'active' | 'completed' | 'cancelled' | 'failed';
  retryCount: number;
  output: unknown;
}

export type JobQueue = ReturnType<typeof createJobQueue>;

const SCHEMA = 'pgboss';

/** Queues whose jobs are taken over when their process dies (the reaper's tick is not retried). */
const OWNED: JobName[] = ['session-provision', 'session-teardown'];

/**
 * Jobs owned by a process that is gone: running (active) ones, and provisioning jobs still held for
 * a creator (data.held). Each process holds a lock per job it owns (server/process-locks.ts), and
 * PostgreSQL drops those locks with the process. `shared` adds that test; without it (the embedded
 * engine, one process) every such job is orphaned once the process restarts. A job just fetched is
 * locked by its handler a moment later, hence the two seconds; right after PostgreSQL itself
 * restarted nobody's locks are back yet (each process retakes them every 250 ms until it can),
 * hence the five.
 */
const orphansSql = (shared: boolean) => `SELECT j.id::text AS id, j.name, j.state::text AS state
FROM ${SCHEMA}.job j
WHERE j.name = ANY($1::text[])
  AND ((j.state = 'active' AND j.started_on < now() - interval '2 seconds')
    OR (j.state = 'created' AND j.data ? 'held'))${
      shared
        ? `
  AND pg_postmaster_start_time() < now() - interval '5 seconds'
  AND NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = ${PROCESS_LOCK_SPACE}::oid AND l.objid = hashtext(j.id::text)::oid)`
        : ''
    }`;

/**
 * Creates pg-boss's schema (no queues) in an embedded database, as the first start() would. The
 * embedded database's seed ships it (server/pglite-seed.ts): creating it takes seconds in PGlite.
 */
export async function installJobSchema(pglite: PGlite): Promise<void> {
  const boss = new PgBoss({
    schema: SCHEMA,
    db: fromPglite(pglite),
    backend: 'pglite',
    supervise: false,
    schedule: false,
    registerInstance: false,
  });
  await boss.start();
  await boss.stop({ graceful: false, close: false });
}

export function createJobQueue(options: JobQueueOptions) {
  const log = options.logger.child({ module: 'jobs' });
  const heartbeatSeconds = Math.max(10, options.heartbeatSeconds ?? 10);
  const { database } = options;
  const common = {
    schema: SCHEMA,
    // The monitor is what notices a dead worker's missing heartbeat: keep it well inside 60 s.
    monitorIntervalSeconds: Math.min(heartbeatSeconds, 10),
    superviseIntervalSeconds: 10,
    // Instance registration is diagnostics only; skip its extra writes.
    registerInstance: false,
    persistWarnings: false,
    persistQueueStats: false,
  };
  const locks = database.processLocks;
  /** A statement on the job queue's own connection (pool or the embedded engine). */
  const jobSql = async <T>(text: string, values: unknown[]): Promise<T[]> => {
    if (database.jobSql) return (await database.jobSql.executeSql(text, values)).rows as T[];
    return (await database.pglite!.query<T>(text, values)).rows;
  };
  const boss =
    database.kind === 'pglite' && database.pglite
      ? new PgBoss({ ...common, db: fromPglite(database.pglite), backend: 'pglite' })
      : new PgBoss({ ...common, ...(database.jobSql ? { db: database.jobSql } : {}) });
  // pg-boss reports background failures (maintenance, polling during an outage) here; without a
  // listener they would crash the process.
  boss.on('error', (error) => log.warn({ err: error }, 'job queue error'));

  const queueOptions = {
    retryLimit: options.retryLimit ?? 4,
    retryDelay: 2,
    retryBackoff: true,
    retryDelayMax: 60,
    heartbeatSeconds,
    // Image builds can take a while; the heartbeat, not this, detects a dead worker.
    expireInSeconds: 3_600,
  };
  /**
   * Sends that arrive while one is being written go out together, in one insert (a burst of
   * session creates). Each job gets its id here, so each caller learns whether its own job was
   * queued or refused by its queue's policy (null), as with a send of its own.
   */
  const sendBatched = createKeyedBatcher<{ data: object; key: string }, string | null>(
    async (name, calls) => {
      const jobs = calls.map((call) => ({ id: randomUUID(), data: call.data, singletonKey: call.key }));
      const queued = new Set(await boss.insert(name, jobs, { returnId: true }));
      return jobs.map((job) => ({ ok: true, value: queued.has(job.id) ? job.id : null }));
    },
    { maxBatch: 100 },
  );
  /**
   * Held jobs released together go out in one statement (a burst's creates finish their cuts
   * together), and their locks in one more. `extra` joins the job's data (the request id).
   */
  const releaseBatched = createKeyedBatcher<{ jobId: string; extra: object }, void>(
    async (name, calls) => {
      const ids = calls.map((c) => c.jobId);
      // The lock goes first: a worker that fetches the job next must be able to take it (one still
      // held here would leave that worker's run unmarked, and another process would take it over
      // as an orphan). A job held without its lock in between is at worst released by that
      // takeover, to the same effect, and so is one whose release below fails.
      await locks.unlock(ids);
      await jobSql(
        `UPDATE ${SCHEMA}.job j SET start_after = now(), data = (j.data - 'held' - 'cutBranch') || r.extra
           FROM unnest($2::uuid[], $3::jsonb[]) AS r(id, extra)
           WHERE j.name = $1 AND j.id = r.id AND j.state = 'created' AND j.data ? 'held'`,
        [name, ids, calls.map((c) => JSON.stringify(c.extra))],
      );
      wake(name as JobName);
      return calls.map(() => ({ ok: true, value: undefined }));
    },
    { maxBatch: 100 },
  );
  let started = false;
  /** This process's workers, by queue, and whether each is running a job. */
  const workers = new Map<JobName, Array<{ id: string; busy: boolean }>>();
  /** Provisioning jobs this process holds for sessions it is creating: job id by session id. */
  const held = new Map<string, string>();
  const wake = (name: JobName) => {
    for (const worker of workers.get(name) ?? []) if (!worker.busy) boss.notifyWorker(worker.id);
  };
  /**
   * Marks a job this process is about to run as its own. Its lock can still be held elsewhere for a
   * moment (a creator releasing it): the run waits for it, a minute at most (only a key hashing
   * alike could hold it longer), so it is never taken for an orphan while it runs.
   */
  async function ownJob(jobId: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    let busy = await locks.lock([jobId]);
    while (busy.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      busy = await locks.retry(busy);
    }
    if (busy.length > 0) log.warn({ jobId }, 'running a job whose lock another process holds');
  }
  /** Orphans seen by the last check: a job is taken over only when two checks in a row find it. */
  let suspects = new Set<string>();
  let orphanTimer: NodeJS.Timeout | null = null;
  let checking: Promise<unknown> | null = null;

  /**
   * Takes over the jobs of processes that are gone: a running job is failed, so it is retried at
   * once (its retry's backoff is skipped: nothing went wrong with the work), and a held
   * provisioning job is released to run, cutting its session's branch if that is missing. One
   * process at a time does it, so a job is never failed twice.
   */
  async function takeOverOrphans(confirmed: boolean): Promise<string[]> {
    const taken = await locks.exclusive('job takeover', async () => {
      const rows = await jobSql<{ id: string; name: JobName; state: string }>(orphansSql(locks.shared), [
        OWNED,
      ]);
      const seen = suspects;
      suspects = new Set(rows.map((r) => r.id));
      const orphans = confirmed ? rows : rows.filter((r) => seen.has(r.id));
      if (orphans.length === 0) return [];
      const active = orphans.filter((r) => r.state === 'active');
      for (const name of new Set(active.map((r) => r.name))) {
        await boss.fail(
          name,
          active.filter((r) => r.name === name).map((r) => r.id),
          { message: 'the process running this job stopped' },
        );
      }
      const ids = orphans.map((r) => r.id);
      await jobSql(
        `UPDATE ${SCHEMA}.job SET start_after = now(), data = data - 'held'
         WHERE id = ANY($1::uuid[]) AND (state = 'retry' OR (state = 'created' AND data ? 'held'))`,
        [ids],
      );
      for (const name of new Set(orphans.map((r) => r.name))) wake(name);
      log.warn(
        { jobs: orphans.map((r) => ({ id: r.id, queue: r.name, state: r.state })) },
        'took over the jobs of a stopped process',
      );
      return ids;
    });
    return taken ?? [];
  }

  return {
    boss,
    async start(): Promise<void> {
      await boss.start();
      for (const name of Object.values(JOBS)) {
        const { policy = 'stately', ...override } = QUEUE_OVERRIDES[name] ?? {};
        const options = { ...queueOptions, ...override };
        const existing = await boss.getQueue(name);
        if (existing) {
          const { heartbeatSeconds: _h, retryDelayMax: _r, ...updatable } = options;
          await boss.updateQueue(name, updatable);
        }
        // stately + singletonKey = session id: at most one queued and one running attempt per session.
        else await boss.createQueue(name, { ...options, policy });
      }
      // The embedded engine has one process: whatever a previous run left running or held is
      // orphaned, before this run's workers start.
      if (!locks.shared) await takeOverOrphans(true);
      else {
        const check = () => {
          checking ??= takeOverOrphans(false)
            .catch((error: unknown) => log.warn({ err: error }, 'could not look for orphaned jobs'))
            .finally(() => {
              checking = null;
            });
        };
        // The first look at once: a restarted process takes over its previous life's jobs one
        // interval after it starts.
        check();
        orphanTimer = setInterval(check, options.orphanCheckMs ?? 1_000);
        orphanTimer.unref();
      }
      started = true;
    },

    /** One look for orphaned jobs now; `confirmed`: take over what it finds without a second look (tests). */
    takeOverOrphans,

    /**
     * Reserves a provisioning job id for each session about to be admitted and marks it as this
     * process's before anything is written: if the process dies from here on, the job it writes
     * with the admission is released at once (not after `holdMs`).
     */
    async holdProvision(sessionIds: string[]): Promise<void> {
      const jobIds = sessionIds.map(() => randomUUID());
      await locks.lock(jobIds);
      for (const [i, sessionId] of sessionIds.entries()) held.set(sessionId, jobIds[i]!);
    },

    /**
     * Writes the held provisioning jobs of admitted sessions through the admission's own
     * transaction (pg-boss's `db` option): a session is never admitted without its job. Each waits
     * for releaseProvision (or its creator's death, or `holdMs`); data.cutBranch tells a job that
     * runs without that release to cut the session's branch if it is missing.
     */
    async writeProvision(
      db: JobSqlExecutor,
      sessions: Array<{ sessionId: string; requestId?: string | null }>,
    ): Promise<void> {
      const startAfter = new Date(Date.now() + (options.holdMs ?? 30_000));
      const jobs = sessions.map(({ sessionId, requestId }) => {
        const id = held.get(sessionId);
        if (!id) throw new Error(`no provisioning job was held for session ${sessionId}`);
        const data: ProvisionJob & { held: true } = {
          sessionId,
          cutBranch: true,
          held: true,
          ...(requestId ? { requestId } : {}),
        };
        return { id, data, singletonKey: sessionId, startAfter };
      });
      if (jobs.length > 0) await boss.insert(JOBS.provision, jobs, { db, returnId: true });
    },

    /**
     * The creator is done with the session (its branch cut, or its create failed): its held job
     * may run now, on whichever process fetches it first. False when this process held none.
     */
    async releaseProvision(sessionId: string, requestId?: string | null): Promise<boolean> {
      const jobId = held.get(sessionId);
      if (!jobId) return false;
      held.delete(sessionId);
      await releaseBatched(JOBS.provision, { jobId, extra: requestId ? { requestId } : {} });
      return true;
    },

    /** Forgets held jobs that were never written (the sessions were refused, or the admission failed). */
    async dropProvision(sessionIds: string[]): Promise<void> {
      const jobIds = sessionIds.flatMap((id) => held.get(id) ?? []);
      for (const id of sessionIds) held.delete(id);
      await locks.unlock(jobIds);
    },

    /**
     * Enqueues a job; `key` names the resource so its history can be found (findJobs). The
     * workers of this process that are not running a job look for it at once instead of at their
     * next poll (up to `pollingIntervalSeconds` later): a session's provisioning starts as soon as
     * it is created. One of them takes it; when every worker is busy, the first to finish does
     * (see work). Waking only one idle worker is not enough: one already fetching would count as
     * idle, take an earlier job and leave this one to the poll.
     */
    async send(name: JobName, data: object, key: string): Promise<string | null> {
      const id = await sendBatched(name, { data, key });
      if (id) wake(name);
      return id;
    },

    /**
     * Runs handler for jobs of `name` on this process until stop(), `concurrency` at a time. Each
     * worker that finished a job fetches the next at once: pg-boss waits a full poll interval after
     * every fetch of a one-job batch, so a backlog would otherwise drain at one job per worker per
     * interval (four provisions a second) however fast each job runs. A fetch that finds nothing
     * falls back to the poll.
     */
    async work<T extends object>(name: JobName, handler: (job: Job<T>) => Promise<unknown>): Promise<void> {
      for (let i = 0; i < (options.concurrency ?? 4); i++) {
        const self = { id: '', busy: false };
        self.id = await boss.work<T>(
          name,
          { pollingIntervalSeconds: options.pollingIntervalSeconds ?? 1, batchSize: 1, localConcurrency: 1 },
          async ([job]) => {
            if (!job) return undefined;
            self.busy = true;
            // The job is this process's while it runs: its death releases the lock, and another
            // process takes the job over at once (takeOverOrphans).
            const owned = OWNED.includes(name);
            try {
              if (owned) await ownJob(job.id);
              return await handler(job);
            } finally {
              if (owned) await locks.unlock([job.id]).catch(() => {});
              self.busy = false;
              // Marks the worker as woken while it still runs the job: its loop skips the delay.
              boss.notifyWorker(self.id);
            }
          },
        );
        workers.set(name, [...(workers.get(name) ?? []), self]);
      }
    },

    /** The newest jobs of `name` for `key`, newest first. */
    async history(name: JobName, key: string): Promise<JobStatus[]> {
      const jobs = await boss.findJobs(name, { key });
      return jobs
        .sort((a, b) => b.createdOn.getTime() - a.createdOn.getTime())
        .map((j) => ({ id: j.id, state: j.state, retryCount: j.retryCount, output: j.output }));
    },

    /** Queued + active jobs per queue (metrics). */
    async depth(): Promise<Record<JobName, { queued: number; active: number; failed: number }>> {
      const result = {} as Record<JobName, { queued: number; active: number; failed: number }>;
      for (const name of Object.values(JOBS)) {
        const q = await boss.getQueue(name);
        result[name] = {
          queued: q?.queuedCount ?? 0,
          active: q?.activeCount ?? 0,
          failed: q?.failedCount ?? 0,
        };
      }
      return result;
    },

    /** Stops polling; waits up to timeoutMs for running jobs (the rest resume elsewhere). */
    async stop(timeoutMs: number): Promise<void> {
      if (!started) return;
      started = false;
      if (orphanTimer) clearInterval(orphanTimer);
      orphanTimer = null;
      await checking;
      workers.clear();
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true }).catch((error: unknown) => {
        log.warn({ err: error }, 'job queue did not stop cleanly');
      });
    },
  };
}
