// The idle reaper (R-LEASE-2…4). Every interval it looks for RUNNING sessions whose sandbox holds no
// live lease (none, released or expired) and has been idle past the idle timeout, where idle means
// since max(lastActivityAt, lease.releasedAt, lease.expiresAt while unreleased, session.startedAt).
// Only leases and runtime/turn activity move lastActivityAt; HTTP, WebSocket, preview, telemetry
// or health traffic never does. A sandbox whose agent is still booting (no runtime report yet, or
// STARTING) is not idle but booting: it has the boot timeout instead, so an image whose agent
// takes minutes to start is not stopped before its first turn, whatever the idle timeout.
//
// Run once across the fleet: with a job queue, every process enqueues the tick as the `idle-reaper`
// job each interval and the queue's `exclusive` policy keeps one tick queued or running across the
// fleet (visible, and counted in the job metrics, like any job); the tick itself also takes a
// transaction-level PostgreSQL advisory try-lock, so direct callers never scan twice at once. Correctness does not rest on that lock, though: a
// sandbox is stopped only after a fencing statement succeeds, which bumps the lease generation the
// reaper read (or creates the lease row when it read none) and marks the lease as held by the
// reaper. A renewal or acquire that happened in between makes the fence match nothing; an acquire
// after it is refused. A second reaper's fence on the same row then matches nothing either.
//
// Stop reasons: LEASE_EXPIRED when the lease expired without being released (a dead or cut-off
// daemon), IDLE_REAPED otherwise (released after the last turn, or never acquired).
import { Prisma, type StopReason } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import { REAPER_HOLDER_PREFIX } from './leases';

/** Advisory lock key of the reaper ("SCREAPER" as ASCII). */
export const REAPER_LOCK_KEY = 0x5343_5245_4150_4552n;

// A released lease stops protecting the sandbox at its release, whatever its expiresAt said.
const UNRELEASED_EXPIRY = Prisma.raw('CASE WHEN l."releasedAt" IS NULL THEN l."expiresAt" END');
// Booting, with the boot timeout: the agent has not reported ready, or it has but the session's
// initial prompt has not started a turn yet (no lease was ever held). Handing the prompt to a
// freshly started OpenCode can take longer than the idle timeout on a loaded host, and a sandbox
// reaped then never runs the work it was created for.
const BOOTING = Prisma.raw(`(sb."runtimeState" IS NULL OR sb."runtimeState" = 'STARTING'
  OR (sb."runtimeState" = 'HEALTHY' AND s."prompt" IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM "ExecutionLease" held WHERE held."sandboxId" = sb."id")))`);
const IDLE_SINCE = Prisma.sql`GREATEST(sb."lastActivityAt", l."releasedAt", ${UNRELEASED_EXPIRY}, s."startedAt")`;

export interface ReaperCandidate {
  sessionId: string;
  sandboxId: string;
  /** Lease generation read (null: the sandbox never had a lease). */
  generation: number | null;
  /** Already fenced by a reaper whose stop did not complete (crash between fence and stop). */
  fencedReason: StopReason | null;
  reason: StopReason;
  idleSince: Date;
}

export interface ReaperOptions {
  db: Db;
  logger: Logger;
  idleTimeoutMs: number;
  /** How long a sandbox may boot (runtime not reported, or STARTING). @default idleTimeoutMs */
  bootTimeoutMs?: number;
  intervalMs: number;
  /** Stops a live session (services.sessions.stopInternal); null when it was no longer live. */
  stop: (sessionId: string, reason: StopReason) => Promise<unknown>;
  /** Work done by whichever process holds the reaper lock (telemetry retention). */
  housekeeping?: () => Promise<void>;
  /**
   * Enqueues one tick as a job (the job's handler calls tick()); without it start() runs tick()
   * on this process's own timer.
   */
  enqueue?: () => Promise<unknown>;
  /** Take the fleet-wide advisory try-lock per tick. @default true */
  singleton?: boolean;
  /** Candidates handled per tick. @default 100 */
  batchSize?: number;
  now?: () => number;
}

export interface TickResult {
  /** false when another process held the reaper lock. */
  ran: boolean;
  stopped: Array<{ sessionId: string; reason: StopReason }>;
}

export type Reaper = ReturnType<typeof createReaper>;

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];
type Queryable = Pick<Db, '$queryRaw'> | Pick<Tx, '$queryRaw'>;

export function createReaper(options: ReaperOptions) {
  const { db } = options;
  const log = options.logger.child({ module: 'reaper' });
  const now = options.now ?? Date.now;
  const batchSize = options.batchSize ?? 100;
  const bootTimeoutMs = options.bootTimeoutMs ?? options.idleTimeoutMs;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;

  /** `since` lies past the timeout that applies to the sandbox `sb`: booting or idle. */
  function pastTimeout(since: Prisma.Sql, at: Date): Prisma.Sql {
    const idleCutoff = new Date(at.getTime() - options.idleTimeoutMs);
    const bootCutoff = new Date(at.getTime() - bootTimeoutMs);
    return Prisma.sql`((${BOOTING} AND ${since} <= ${bootCutoff}) OR (NOT ${BOOTING} AND ${since} <= ${idleCutoff}))`;
  }

  async function findCandidates(q: Queryable = db): Promise<ReaperCandidate[]> {
    const at = new Date(now());
    const rows = await (q as Pick<Db, '$queryRaw'>).$queryRaw<
      Array<{
        sessionId: string;
        sandboxId: string;
        generation: number | null;
        holder: string | null;
        expired: boolean;
        idleSince: Date;
      }>
    >`
      SELECT s."id" AS "sessionId", sb."id" AS "sandboxId", l."generation", l."holder",
             (l."id" IS NOT NULL AND l."releasedAt" IS NULL AND l."expiresAt" <= ${at}) AS "expired",
             ${IDLE_SINCE} AS "idleSince"
      FROM "Session" s
      JOIN "Sandbox" sb ON sb."sessionId" = s."id"
      LEFT JOIN "ExecutionLease" l ON l."sandboxId" = sb."id"
      WHERE s."status" = 'RUNNING'
        AND (
          l."holder" LIKE ${`${REAPER_HOLDER_PREFIX}%`}
          OR (
            (l."id" IS NULL OR l."releasedAt" IS NOT NULL OR l."expiresAt" <= ${at})
            AND ${pastTimeout(IDLE_SINCE, at)}
          )
        )
      ORDER BY 6 ASC
      LIMIT ${batchSize}`;
    return rows.map((r) => {
      const fencedReason = r.holder?.startsWith(REAPER_HOLDER_PREFIX)
        ? (r.holder.slice(REAPER_HOLDER_PREFIX.length) as StopReason)
        : null;
      return {
        sessionId: r.sessionId,
        sandboxId: r.sandboxId,
        generation: r.generation,
        fencedReason,
        reason: fencedReason ?? (r.expired ? 'LEASE_EXPIRED' : 'IDLE_REAPED'),
        idleSince: r.idleSince,
      };
    });
  }

  /**
   * The fencing statement: succeeds only if the lease generation read is still current, the lease is
   * still not live and the sandbox is still idle past the timeout. It moves the generation on and
   * hands the lease to the reaper, so no daemon can renew or acquire it afterwards.
   */
  async function fence(candidate: ReaperCandidate, q: Queryable = db): Promise<boolean> {
    if (candidate.fencedReason) return true;
    const at = new Date(now());
    const holder = `${REAPER_HOLDER_PREFIX}${candidate.reason}`;
    const query = q as Pick<Db, '$queryRaw'>;
    if (candidate.generation === null) {
      // No target on ON CONFLICT: the lease is unique by sandbox and by session, and a second
      // reaper (or the daemon's first acquire) racing this insert can collide on either key.
      const rows = await query.$queryRaw<Array<{ generation: number }>>`
        INSERT INTO "ExecutionLease"
          ("id", "sessionId", "sandboxId", "generation", "holder", "acquiredAt", "renewedAt", "expiresAt", "releasedAt")
        SELECT gen_random_uuid(), sb."sessionId", sb."id", 1, ${holder}, ${at}, ${at}, ${at}, ${at}
        FROM "Sandbox" sb JOIN "Session" s ON s."id" = sb."sessionId"
        WHERE sb."id" = ${candidate.sandboxId}::uuid AND s."status" = 'RUNNING'
          AND ${pastTimeout(Prisma.sql`GREATEST(sb."lastActivityAt", s."startedAt")`, at)}
        ON CONFLICT DO NOTHING
        RETURNING "generation"`;
      return rows.length === 1;
    }
    const rows = await query.$queryRaw<Array<{ generation: number }>>`
      UPDATE "ExecutionLease" l SET
        "generation" = l."generation" + 1,
        "holder" = ${holder},
        "expiresAt" = LEAST(l."expiresAt", ${at})
      FROM "Sandbox" sb JOIN "Session" s ON s."id" = sb."sessionId"
      WHERE l."sandboxId" = ${candidate.sandboxId}::uuid AND sb."id" = l."sandboxId"
        AND l."generation" = ${candidate.generation}::int
        AND (l."releasedAt" IS NOT NULL OR l."expiresAt" <= ${at})
        AND s."status" = 'RUNNING'
        AND ${pastTimeout(IDLE_SINCE, at)}
      RETURNING l."generation"`;
    return rows.length === 1;
  }

  /** Fences a candidate read earlier and, when the fence holds, stops its session. */
  async function reap(candidate: ReaperCandidate, q: Queryable = db): Promise<boolean> {
    if (!(await fence(candidate, q))) {
      log.debug({ sessionId: candidate.sessionId }, 'fence lost: the sandbox was renewed or stopped');
      return false;
    }
    await stopFenced(candidate);
    return true;
  }

  async function stopFenced(candidate: ReaperCandidate): Promise<void> {
    log.info(
      { sessionId: candidate.sessionId, reason: candidate.reason, idleSince: candidate.idleSince },
      'reaping idle sandbox',
    );
    await options.stop(candidate.sessionId, candidate.reason);
  }

  async function tick(): Promise<TickResult> {
    const singleton = options.singleton ?? true;
    // Scan and fence inside one short transaction holding the fleet-wide try-lock; the slow part
    // (provider teardown) runs after commit.
    const fenced = await db.$transaction(
      async (tx) => {
        if (singleton) {
          const [lock] = await tx.$queryRaw<Array<{ locked: boolean }>>`
            SELECT pg_try_advisory_xact_lock(${REAPER_LOCK_KEY}::bigint) AS "locked"`;
          if (!lock?.locked) return null;
        }
        const won: ReaperCandidate[] = [];
        for (const candidate of await findCandidates(tx)) {
          if (await fence(candidate, tx)) won.push(candidate);
        }
        return won;
      },
      { timeout: 60_000, maxWait: 10_000 },
    );
    if (fenced === null) return { ran: false, stopped: [] };
    const stopped: TickResult['stopped'] = [];
    for (const candidate of fenced) {
      try {
        await stopFenced(candidate);
        stopped.push({ sessionId: candidate.sessionId, reason: candidate.reason });
      } catch (error) {
        // Fenced but not stopped: the next tick finds the reaper-held lease and retries.
        log.error({ sessionId: candidate.sessionId, err: error }, 'reaping failed');
      }
    }
    if (options.housekeeping) {
      await options.housekeeping().catch((error: unknown) => log.warn({ err: error }, 'housekeeping failed'));
    }
    return { ran: true, stopped };
  }

  function schedule(): void {
    timer = setTimeout(() => {
      const work = options.enqueue ? options.enqueue().then(() => undefined) : tick();
      running = work
        .catch((error: unknown) => log.error({ err: error }, 'reaper tick failed (or could not be enqueued)'))
        .finally(() => {
          running = null;
          if (timer) schedule();
        });
    }, options.intervalMs);
    timer.unref();
  }

  return {
    findCandidates: (q?: Queryable) => findCandidates(q),
    fence: (candidate: ReaperCandidate, q?: Queryable) => fence(candidate, q),
    reap: (candidate: ReaperCandidate) => reap(candidate),
    tick,
    start(): void {
      if (timer) return;
      schedule();
    },
    async stop(): Promise<void> {
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
