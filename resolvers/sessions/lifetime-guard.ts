// Ends sessions cleanly before their provider's hard sandbox limit (E2B pauses a sandbox at start
// + 1 h on Hobby, 24 h on Pro, whatever keep-alives say: a pause in the middle of a turn). Each tick
// warns the sessions whose sandbox expires within `warnAheadMs` — a sandbox warning, published
// like every sandbox change — and stops those within `stopAheadMs` with stop reason PROVIDER, so the
// teardown completes while the sandbox still runs. Adapters report the limit as
// `ProviderSandbox.expiresAt`, stored by provisioning. Runs from the reaper's housekeeping.
import type { StopReason } from '../../prisma/generated/client/client';
import type { Db, Logger } from '../platform';
import type { Events } from '../events/events';

export interface LifetimeGuardOptions {
  db: Db;
  events: Pick<Events, 'sandbox'>;
  logger: Logger;
  /** Stops a live session (services.sessions.stopInternal). */
  stop: (sessionId: string, reason: StopReason) => Promise<unknown>;
  /** How long before the expiry a session is warned. @default 600_000 */
  warnAheadMs?: number;
  /** How long before the expiry a session is stopped. @default 120_000 */
  stopAheadMs?: number;
  now?: () => number;
}

/** The warning a sandbox carries once its session was told about the coming stop. */
export function lifetimeWarning(provider: string, expiresAt: Date): string {
  return `${provider} ends this sandbox at ${expiresAt.toISOString()} (its maximum sandbox length); the session will be stopped shortly before — start a new session to continue`;
}

export function createLifetimeGuard(options: LifetimeGuardOptions) {
  const { db } = options;
  const log = options.logger.child({ module: 'lifetime' });
  const now = options.now ?? Date.now;
  const warnAheadMs = options.warnAheadMs ?? 600_000;
  const stopAheadMs = options.stopAheadMs ?? 120_000;

  return {
    /** One pass: warns, then stops, what is due; returns the sessions of each. */
    async tick(): Promise<{ warned: string[]; stopped: string[] }> {
      const at = now();
      const due = await db.sandbox.findMany({
        where: {
          expiresAt: { not: null, lte: new Date(at + warnAheadMs) },
          session: { status: 'RUNNING' },
        },
        include: { session: { select: { accountId: true } } },
      });
      const warned: string[] = [];
      const stopped: string[] = [];
      for (const sandbox of due) {
        const expiresAt = sandbox.expiresAt as Date;
        const warning = lifetimeWarning(sandbox.provider, expiresAt);
        if (!sandbox.warnings.includes(warning)) {
          const updated = await db.sandbox.update({
            where: { id: sandbox.id },
            data: { warnings: { push: warning } },
          });
          await options.events.sandbox(updated, sandbox.session.accountId);
          warned.push(sandbox.sessionId);
        }
        if (expiresAt.getTime() - stopAheadMs <= at) {
          log.info(
            { sessionId: sandbox.sessionId, expiresAt },
            'stopping a session before its sandbox expires',
          );
          await options.stop(sandbox.sessionId, 'PROVIDER');
          stopped.push(sandbox.sessionId);
        }
      }
      return { warned, stopped };
    },
  };
}
