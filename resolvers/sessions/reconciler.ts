// Periodic reconciliation of what providers run against what the database says:
// - LOCAL entry processes on this host that no live session owns (a teardown that never ran, a
//   server killed between stop and destroy) are stopped and forgotten;
// - a live session whose sandbox the provider no longer knows is stopped with PROVIDER
//   (provisioning.syncProviderState).
// Each step is idempotent, so every process may run it; the LOCAL step must, since only processes
// on the sandbox's host can signal it.
import type { Db, Logger } from '../platform';
import { LIVE_SESSION_STATUSES } from '../accounts/limits';
import { hostIdentity } from '../providers/local-identity';
import type { ProviderRegistry } from '../providers/registry';
import type { Provisioner } from './provisioning';

export interface ReconcilerOptions {
  db: Db;
  providers: ProviderRegistry;
  provisioner: Provisioner;
  logger: Logger;
  /** @default 30_000 */
  intervalMs?: number;
  /** Live sandboxes checked with their provider per pass. @default 50 */
  batchSize?: number;
}

export type Reconciler = ReturnType<typeof createReconciler>;

export function createReconciler(options: ReconcilerOptions) {
  const { db } = options;
  const log = options.logger.child({ module: 'reconciler' });
  const host = hostIdentity();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;

  async function reconcile(): Promise<{ stoppedOrphans: string[]; vanished: string[] }> {
    const stoppedOrphans: string[] = [];
    const vanished: string[] = [];
    const processes = await db.localSandboxProcess.findMany({ where: { host }, take: 200 });
    if (processes.length > 0) {
      const sessionIds = processes.flatMap((p) => (p.sessionId ? [p.sessionId] : []));
      const live = new Set(
        (
          await db.session.findMany({
            where: { id: { in: sessionIds }, status: { in: [...LIVE_SESSION_STATUSES] } },
            select: { id: true },
          })
        ).map((s) => s.id),
      );
      const local = options.providers.get('LOCAL');
      for (const p of processes) {
        if (p.sessionId && live.has(p.sessionId)) continue;
        // Re-read: a session can turn live only by a new create, which has a new sandbox id, so
        // the check above cannot go stale for this row; destroy is idempotent anyway.
        try {
          if ((await local.status(p.providerSandboxId)) === 'STARTED') {
            await local.destroy(p.providerSandboxId);
            stoppedOrphans.push(p.providerSandboxId);
          }
          await db.localSandboxProcess.deleteMany({ where: { providerSandboxId: p.providerSandboxId } });
        } catch (error) {
          log.warn(
            { providerSandboxId: p.providerSandboxId, err: error },
            'could not stop an orphaned sandbox',
          );
        }
      }
    }
    const sandboxes = await db.sandbox.findMany({
      where: { status: 'STARTED', session: { status: 'RUNNING' }, providerSandboxId: { not: null } },
      select: { id: true, sessionId: true },
      orderBy: { updatedAt: 'asc' },
      take: options.batchSize ?? 50,
    });
    for (const sandbox of sandboxes) {
      try {
        if ((await options.provisioner.syncProviderState(sandbox.id)) === 'DESTROYED')
          vanished.push(sandbox.sessionId);
      } catch (error) {
        log.warn({ sandboxId: sandbox.id, err: error }, 'could not read a sandbox state from its provider');
      }
    }
    if (stoppedOrphans.length > 0) log.warn({ sandboxes: stoppedOrphans }, 'stopped orphaned sandboxes');
    if (vanished.length > 0) log.warn({ sessions: vanished }, 'sessions whose sandbox vanished');
    return { stoppedOrphans, vanished };
  }

  return {
    reconcile,
    start(): void {
      if (timer) return;
      timer = setInterval(() => {
        if (running) return;
        running = reconcile()
          .catch((error: unknown) => log.warn({ err: error }, 'reconcile pass failed; retrying next tick'))
          .finally(() => {
            running = null;
          });
      }, options.intervalMs ?? 30_000);
      timer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
