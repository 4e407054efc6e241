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
import type { Database, Logger } from '../platform';

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
}

export interface JobStatus {
  id: string;
  state: 'created' | 'retry' | 'active' | 'completed' | 'cancelled' | 'failed';
  retryCount: number;
  output: unknown;
}

export type JobQueue = ReturnType<typeof createJobQueue>;

const SCHEMA = 'pgboss';

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
  let started = false;
  /** This process's workers, by queue, and whether each is running a job. */
  const workers = new Map<JobName, Array<{ id: string; busy: boolean }>>();

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
      started = true;
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
      if (id) for (const worker of workers.get(name) ?? []) if (!worker.busy) boss.notifyWorker(worker.id);
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
            try {
              return await handler(job);
            } finally {
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
      workers.clear();
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true }).catch((error: unknown) => {
        log.warn({ err: error }, 'job queue did not stop cleanly');
      });
    },
  };
}
