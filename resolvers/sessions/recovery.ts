// No session may sit in PROVISIONING without something that will finish it, because it holds a
// slot of the concurrent-session limit. Provisioning is a durable job, written with the admission
// itself; a job whose process died is taken over within seconds (resolvers/jobs/queue.ts). This
// sweep is the safety net behind that, for what no job covers:
// - a session with no job at all (admitted before jobs were written with the admission, or its
//   job deleted) → resumed by enqueueing the job, or failed without a base commit;
// - a job that finished or gave up while the session stayed PROVISIONING (recording the outcome
//   failed) → failed with the job's error;
// - a sandbox that never reported in (job done, daemon silent) → failed after provisioningTimeoutMs.
// Any server process may run it: each transition is a conditional update and the job queue keeps at
// most one queued attempt per session.
import type { Db, Logger } from '../platform';
import { JOBS, type JobQueue, type ProvisionJob } from '../jobs/queue';
import type { SessionLifecycle } from './lifecycle';

export interface RecoveryOptions {
  db: Db;
  sessions: SessionLifecycle;
  logger: Logger;
  jobs?: JobQueue;
  /** A PROVISIONING session no job covers is resumed or failed after this long. @default 30_000 */
  resumeAfterMs?: number;
  /** A session still PROVISIONING after this long is failed whatever its job says. @default 600_000 */
  provisioningTimeoutMs?: number;
  /** Sweep period of start(). @default 10_000 */
  intervalMs?: number;
  /** Attempts (jobs) before recovery gives up on a session. @default 3 */
  maxResumes?: number;
  now?: () => number;
}

export type Recovery = ReturnType<typeof createRecovery>;

export function createRecovery(options: RecoveryOptions) {
  const timeoutMs = options.provisioningTimeoutMs ?? 600_000;
  const resumeAfterMs = options.resumeAfterMs ?? 30_000;
  const maxResumes = options.maxResumes ?? 3;
  const now = options.now ?? Date.now;
  const log = options.logger.child({ module: 'recovery' });
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;

  async function fail(id: string, reason: string): Promise<boolean> {
    const session = await options.sessions.fail(id, reason, ['PROVISIONING']);
    return session.status === 'FAILED';
  }

  async function sweep(): Promise<{ failed: string[]; resumed: string[] }> {
    const failed: string[] = [];
    const resumed: string[] = [];
    const hardCutoff = new Date(now() - timeoutMs);
    const stale = await options.db.session.findMany({
      where: { status: 'PROVISIONING', updatedAt: { lt: new Date(now() - resumeAfterMs) } },
      select: { id: true, baseCommit: true, updatedAt: true, createdAt: true },
      orderBy: { updatedAt: 'asc' },
      take: 100,
    });
    for (const session of stale) {
      const seconds = Math.round(timeoutMs / 1000);
      if (session.updatedAt < hardCutoff) {
        const reason = `Provisioning did not finish within ${seconds} s (the server handling it stopped); start a new session.`;
        if (await fail(session.id, reason)) failed.push(session.id);
        continue;
      }
      if (!options.jobs) continue;
      if (!session.baseCommit) {
        // The admitting process died between reserving the slot and resolving the base ref.
        const reason = `Provisioning did not finish within ${Math.round(resumeAfterMs / 1000)} s: the server creating the session stopped before handing it off; start a new session.`;
        if (await fail(session.id, reason)) failed.push(session.id);
        continue;
      }
      const history = await options.jobs.history(JOBS.provision, session.id);
      if (history.some((j) => j.state === 'created' || j.state === 'retry' || j.state === 'active')) continue;
      const latest = history[0];
      if (latest?.state === 'failed' || history.length >= maxResumes) {
        const output = latest?.output as { message?: string } | null | undefined;
        const reason = `Provisioning failed after ${history.length} attempt(s): ${output?.message ?? 'the job gave up'}`;
        if (await fail(session.id, reason)) failed.push(session.id);
        continue;
      }
      const sandbox = await options.db.sandbox.findUnique({ where: { sessionId: session.id } });
      // Created and booting: the daemon reports in (or the hard timeout above fails it).
      if (latest?.state === 'completed' && sandbox?.providerSandboxId) continue;
      // The creating process may still be cutting the branch (a push can wait long under load) or
      // have stopped before it: the job cuts it if missing.
      const job: ProvisionJob = { sessionId: session.id, cutBranch: true };
      await options.jobs.send(JOBS.provision, job, session.id);
      // Touch the session so the next sweep gives the new job its own window.
      await options.db.session.updateMany({
        where: { id: session.id, status: 'PROVISIONING' },
        data: { provisioningError: null },
      });
      resumed.push(session.id);
    }
    if (failed.length > 0) log.warn({ sessions: failed }, 'failed interrupted provisioning');
    if (resumed.length > 0) log.warn({ sessions: resumed }, 'resumed interrupted provisioning');
    return { failed, resumed };
  }

  return {
    /** One pass; returns the sessions failed (the historical shape) — see sweepDetailed. */
    async sweep(): Promise<string[]> {
      return (await sweep()).failed;
    },
    sweepDetailed: sweep,
    start(): void {
      if (timer) return;
      const tick = () => {
        if (running) return;
        running = sweep()
          .catch((error: unknown) => log.warn({ err: error }, 'recovery sweep failed; retrying next tick'))
          .finally(() => {
            running = null;
          });
      };
      timer = setInterval(tick, options.intervalMs ?? 10_000);
      timer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
