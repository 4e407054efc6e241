// Sessions whose provisioning was interrupted (the admitting process died or restarted mid-way)
// would otherwise sit in PROVISIONING forever and hold a slot of the concurrent-session limit.
// Any server process may run this sweep: the FAILED transition is a conditional update, so a
// session is failed once, and never while another process is still provisioning it in time.
import type { Db } from '../platform';
import type { Logger } from '../platform';
import type { SessionLifecycle } from './lifecycle';

export interface RecoveryOptions {
  db: Db;
  sessions: SessionLifecycle;
  logger: Logger;
  /** A session still PROVISIONING after this long is failed. @default 600_000 */
  provisioningTimeoutMs?: number;
  now?: () => number;
}

export function createRecovery(options: RecoveryOptions) {
  const timeoutMs = options.provisioningTimeoutMs ?? 600_000;
  const now = options.now ?? Date.now;
  const log = options.logger.child({ module: 'recovery' });
  return {
    /** Fails stale PROVISIONING sessions; returns their ids. */
    async sweep(): Promise<string[]> {
      const cutoff = new Date(now() - timeoutMs);
      const stale = await options.db.session.findMany({
        where: { status: 'PROVISIONING', updatedAt: { lt: cutoff } },
        select: { id: true },
        take: 100,
      });
      const failed: string[] = [];
      for (const { id } of stale) {
        const session = await options.sessions.fail(
          id,
          `Provisioning did not finish within ${Math.round(timeoutMs / 1000)} s (the server handling it stopped); start a new session.`,
          ['PROVISIONING'],
        );
        if (session.status === 'FAILED') failed.push(id);
      }
      if (failed.length > 0) log.warn({ sessions: failed }, 'failed interrupted provisioning');
      return failed;
    },
  };
}
