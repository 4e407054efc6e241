// Periodic reconciliation of what providers run against what the database says:
// - LOCAL entry processes on this host that no live session owns (a teardown that never ran, a
//   server killed between stop and destroy) are stopped and forgotten;
// - cloud sandboxes tagged with this installation's id whose Sandbox row is gone, or whose session
//   is no longer live, are destroyed once they have looked orphaned for `orphanGraceMs` (a
//   teardown in progress finishes first). A row still PENDING/CREATING is never touched while its
//   create may be in flight (`createGraceMs` after the row last changed). Sandboxes without our
//   installation's tag (another installation's, or created before tags) are never touched;
// - a running session whose sandbox the provider no longer knows, or reports stopped or paused
//   although we never stopped it, is stopped with PROVIDER (provisioning.syncProviderState). A
//   LOCAL entry's exit runs that check at once for its sandbox (`sandboxExited`); the pass catches
//   what no process saw end (a cloud sandbox, an entry another server process launched).
// Each step is idempotent, so every process may run it; the LOCAL step must, since only processes
// on the sandbox's host can signal it.
import type { Db, Logger } from '../platform';
import { LIVE_SESSION_STATUSES } from '../accounts/limits';
import { hostIdentity } from '../providers/local-identity';
import { type EntryExit, describeEntryExit } from '../providers/local';
import type { ProviderRegistry } from '../providers/registry';
import type { ProviderName, SandboxProvider, TaggedSandbox } from '../providers/types';
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
  /** This installation's id; without it cloud sandboxes are not swept. */
  installationId?: () => Promise<string>;
  /** How long a cloud sandbox must look orphaned before it is destroyed. @default 60_000 */
  orphanGraceMs?: number;
  /** How long a PENDING/CREATING row protects its sandbox (a create in flight). @default 900_000 */
  createGraceMs?: number;
  /** @default Date.now */
  now?: () => number;
}

export interface DestroyedOrphan {
  provider: ProviderName;
  providerSandboxId: string;
  sandboxId: string | null;
  sessionId: string | null;
  reason: string;
}

/** Bytes of the entry log a failureReason quotes (the reason is kept to 2,000 characters). */
const FAILURE_LOG_BYTES = 1_500;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export type Reconciler = ReturnType<typeof createReconciler>;

export function createReconciler(options: ReconcilerOptions) {
  const { db } = options;
  const log = options.logger.child({ module: 'reconciler' });
  const host = hostIdentity();
  const now = options.now ?? Date.now;
  const graceMs = options.orphanGraceMs ?? 60_000;
  const createGraceMs = options.createGraceMs ?? 900_000;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  /** When this process first saw each cloud sandbox unowned (provider:id → ms). */
  const firstSeen = new Map<string, number>();

  /** Why nothing owns `tagged` (null: something does, or may soon). */
  function orphanReason(
    tagged: TaggedSandbox,
    row:
      | {
          status: string;
          providerSandboxId: string | null;
          updatedAt: Date;
          session: { status: string };
        }
      | undefined,
  ): string | null {
    if (!row) return tagged.sandboxId ? 'its Sandbox row is gone' : 'it carries no sandbox id';
    const creating = row.status === 'PENDING' || row.status === 'CREATING';
    if (creating && row.providerSandboxId === null && now() - row.updatedAt.getTime() < createGraceMs)
      return null;
    if (!(LIVE_SESSION_STATUSES as readonly string[]).includes(row.session.status))
      return `its session is ${row.session.status}`;
    if (row.providerSandboxId !== null && row.providerSandboxId !== tagged.providerSandboxId)
      return `its Sandbox row belongs to ${row.providerSandboxId}`;
    return null;
  }

  async function sweepProvider(
    provider: SandboxProvider,
    installationId: string,
  ): Promise<DestroyedOrphan[]> {
    if (!provider.listTagged) return [];
    const tagged = (await provider.listTagged(installationId)).filter((t) => t.state !== 'DESTROYED');
    const ids = [
      ...new Set(tagged.flatMap((t) => (t.sandboxId && UUID.test(t.sandboxId) ? [t.sandboxId] : []))),
    ];
    const rows = new Map(
      (
        await db.sandbox.findMany({
          where: { id: { in: ids } },
          select: {
            id: true,
            status: true,
            providerSandboxId: true,
            updatedAt: true,
            session: { select: { status: true } },
          },
        })
      ).map((r) => [r.id, r]),
    );
    const destroyed: DestroyedOrphan[] = [];
    const seen = new Set<string>();
    for (const t of tagged) {
      const key = `${provider.name}:${t.providerSandboxId}`;
      const row = t.sandboxId ? rows.get(t.sandboxId) : undefined;
      const reason = orphanReason(t, row);
      if (!reason) continue;
      seen.add(key);
      const since = firstSeen.get(key) ?? now();
      firstSeen.set(key, since);
      if (now() - since < graceMs) continue;
      try {
        await provider.destroy(t.providerSandboxId);
        firstSeen.delete(key);
        const orphan = {
          provider: provider.name,
          providerSandboxId: t.providerSandboxId,
          sandboxId: t.sandboxId,
          sessionId: t.sessionId,
          reason,
        };
        destroyed.push(orphan);
        log.warn(orphan, 'destroyed an orphaned provider sandbox');
        // The row (if it still names this sandbox) records the end and closes its running interval.
        if (row && row.providerSandboxId === t.providerSandboxId && row.status !== 'DESTROYED') {
          await options.provisioner.syncProviderState(row.id).catch((error: unknown) => {
            log.warn({ sandboxId: row.id, err: error }, 'could not record a destroyed orphan');
          });
        }
      } catch (error) {
        log.warn(
          { provider: provider.name, providerSandboxId: t.providerSandboxId, err: error },
          'could not destroy an orphaned provider sandbox',
        );
      }
    }
    // Forget what is owned again or gone, so a later orphaning waits the full grace.
    for (const key of firstSeen.keys())
      if (key.startsWith(`${provider.name}:`) && !seen.has(key)) firstSeen.delete(key);
    return destroyed;
  }

  async function sweepCloud(): Promise<DestroyedOrphan[]> {
    if (!options.installationId) return [];
    const installationId = await options.installationId();
    const destroyed: DestroyedOrphan[] = [];
    for (const provider of options.providers.all()) {
      if (provider.name === 'LOCAL') continue;
      try {
        destroyed.push(...(await sweepProvider(provider, installationId)));
      } catch (error) {
        log.warn({ provider: provider.name, err: error }, 'could not list a provider’s sandboxes');
      }
    }
    return destroyed;
  }

  async function reconcile(): Promise<{
    stoppedOrphans: string[];
    /** Sessions stopped because their provider ended the sandbox. */
    ended: string[];
    destroyedCloudOrphans: DestroyedOrphan[];
  }> {
    const stoppedOrphans: string[] = [];
    const ended: string[] = [];
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
        if ((await options.provisioner.syncProviderState(sandbox.id)).ended) ended.push(sandbox.sessionId);
      } catch (error) {
        log.warn({ sandboxId: sandbox.id, err: error }, 'could not read a sandbox state from its provider');
      }
    }
    const destroyedCloudOrphans = await sweepCloud();
    if (stoppedOrphans.length > 0) log.warn({ sandboxes: stoppedOrphans }, 'stopped orphaned sandboxes');
    if (ended.length > 0) log.warn({ sessions: ended }, 'stopped sessions whose sandbox the provider ended');
    return { stoppedOrphans, ended, destroyedCloudOrphans };
  }

  /** Set by stop(): exits reported after it are not checked (the database may be closing). */
  let closed = false;
  const checks = new Set<Promise<unknown>>();

  /**
   * A LOCAL sandbox's entry process exited: if its session is still running (the exit was not
   * our stop), the session is stopped now instead of at the next pass or when its lease expires.
   */
  /** Why a session whose entry exited on its own failed: the exit and the last lines of its log. */
  async function entryFailure(providerSandboxId: string, exit: EntryExit): Promise<string> {
    const how = describeEntryExit(exit);
    const provider = options.providers.has('LOCAL') ? options.providers.get('LOCAL') : null;
    const tail = await provider?.logTail?.(providerSandboxId, FAILURE_LOG_BYTES).catch(() => null);
    const lines = tail?.trim() ? `; last lines of its log:\n${tail.trimEnd()}` : '; its log is empty';
    return `The sandbox's entry process ${how}${lines}`;
  }

  async function sandboxExited(providerSandboxId: string, exit: EntryExit): Promise<void> {
    const sandbox = await db.sandbox.findFirst({
      where: { provider: 'LOCAL', providerSandboxId, status: 'STARTED', session: { status: 'RUNNING' } },
      select: { id: true, sessionId: true },
    });
    if (!sandbox) return;
    const failure = await entryFailure(providerSandboxId, exit);
    if ((await options.provisioner.syncProviderState(sandbox.id, failure)).ended)
      log.warn(
        { sessionId: sandbox.sessionId, providerSandboxId, exitCode: exit.code, signal: exit.signal },
        'failed a session whose sandbox entry exited',
      );
  }

  return {
    reconcile,
    sandboxExited(providerSandboxId: string, exit: EntryExit): void {
      if (closed) return;
      const check = sandboxExited(providerSandboxId, exit).catch((error: unknown) =>
        log.warn({ providerSandboxId, err: error }, 'could not check a sandbox whose entry exited'),
      );
      checks.add(check);
      check.finally(() => checks.delete(check));
    },
    start(): void {
      closed = false;
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
      closed = true;
      if (timer) clearInterval(timer);
      timer = null;
      await Promise.all([running, ...checks]);
    },
  };
}
