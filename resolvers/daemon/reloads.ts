// Runtime reloads (R-AG-7, R-GIT-3). reloadSession records a Reload (RUNNING) and asks the daemon to
// run it (`POST {serviceUrl}/singulacomp/reload` with a user-context header signed with the sandbox
// token the server keeps encrypted); the daemon then reports each phase with reportReloadPhase. A
// FAILED phase ends the reload FAILED with the phase's message; CONFIRM_CONFIG SUCCEEDED ends it
// SUCCEEDED. A daemon that cannot be reached, or refuses, ends the reload FAILED at once.
import type { Reload, ReloadPhaseName, ReloadPhaseStatus } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import {
  type DaemonClient,
  DaemonUnavailableError,
  contextUserId,
  createDaemonClient,
} from './daemon-client';
import { ConflictError, NotFoundError, forbidden } from '../errors';
import type { Events } from '../events/events';
import { parseId } from '../ids';
import type { Principal } from '../auth/principal';
import { assertDaemon, authorize } from '../auth/policy';

export interface ReloadServiceOptions {
  db: Db;
  events: Events;
  logger: Logger;
  encryptionKey: Buffer;
  /** Deadline for the daemon to accept the reload request. @default 10_000 */
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
  /** The server→daemon transport (shared with the conversation and the proxies). */
  daemon?: DaemonClient;
  now?: () => number;
}

export const MAX_PHASE_MESSAGE = 4_000;

export type ReloadService = ReturnType<typeof createReloadService>;

export function createReloadService(options: ReloadServiceOptions) {
  const { db, events } = options;
  const log = options.logger.child({ module: 'reloads' });
  const now = options.now ?? Date.now;
  const daemon =
    options.daemon ??
    createDaemonClient({
      encryptionKey: options.encryptionKey,
      requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });

  async function finish(
    reload: { id: string; sessionId: string },
    accountId: string,
    status: 'SUCCEEDED' | 'FAILED',
    error: string | null,
  ): Promise<void> {
    const { count } = await db.reload.updateMany({
      where: { id: reload.id, status: 'RUNNING' },
      data: { status, error: error?.slice(0, MAX_PHASE_MESSAGE) ?? null, finishedAt: new Date(now()) },
    });
    // A late phase after the reload ended is still progress worth showing.
    if (count >= 0) await events.reload({ reloadId: reload.id, sessionId: reload.sessionId, accountId });
  }

  return {
    /** The reload by id with its session, or null; no read check (callers check the session). */
    findWithSession(id: string) {
      return db.reload.findUnique({ where: { id }, include: { session: true } });
    },

    /** The reload by id (`query`: the GraphQL selection), for an event's reload: throws when gone. */
    get<Q extends object>(id: string, query?: Q) {
      return db.reload.findUniqueOrThrow({ ...(query ?? {}), where: { id } });
    },

    /**
     * reloadSession: users and service accounts with sessions:write on a RUNNING session, and a
     * sandbox token on its own session (the agent's `singulacomp sessions reload`, R-CLI-1).
     */
    async start(
      principal: Principal,
      input: { sessionId: string; noRepo?: boolean | null; force?: boolean | null },
    ): Promise<Reload> {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
      if (!session) throw new NotFoundError('No session with that id.', ['input', 'sessionId']);
      authorize(principal, 'session.reload', session);
      const sandbox = session.sandbox;
      if (session.status !== 'RUNNING' || !sandbox?.serviceUrl || !sandbox.sandboxTokenEnc) {
        throw new ConflictError(
          `Only a RUNNING session with a reachable sandbox can be reloaded (this one is ${session.status}).`,
          ['input', 'sessionId'],
        );
      }
      const noRepo = input.noRepo ?? false;
      const force = input.force ?? false;
      const reload = await db.reload.create({ data: { sessionId, noRepo, force, status: 'RUNNING' } });
      await events.reload({ reloadId: reload.id, sessionId, accountId: session.accountId });

      let failure: string | null = null;
      try {
        const response = await daemon.request(
          {
            sessionId,
            serviceUrl: sandbox.serviceUrl,
            sandboxTokenEnc: sandbox.sandboxTokenEnc,
            serviceHeadersEnc: sandbox.serviceHeadersEnc,
          },
          contextUserId(principal),
          '/singulacomp/reload',
          { method: 'POST', body: { reloadId: reload.id, noRepo, force } },
        );
        if (response.status !== 202) {
          const body = (await response.text().catch(() => '')).slice(0, 500);
          failure = `The sandbox daemon refused the reload (HTTP ${response.status}): ${body}`;
        }
      } catch (error) {
        if (!(error instanceof DaemonUnavailableError)) throw error;
        failure = error.message;
      }
      if (failure) {
        log.warn({ sessionId, reloadId: reload.id, failure }, 'reload request failed');
        await finish(reload, session.accountId, 'FAILED', failure);
      }
      return db.reload.findUniqueOrThrow({ where: { id: reload.id } });
    },

    /** reportReloadPhase: only the sandbox token of the reload's session. */
    async reportPhase(
      principal: Principal | null,
      input: { reloadId: string; phase: ReloadPhaseName; status: ReloadPhaseStatus; message?: string | null },
    ): Promise<Reload> {
      assertDaemon(principal, 'Only the sandbox token can report reload phases.');
      const reloadId = parseId(input.reloadId, 'Reload', ['input', 'reloadId']);
      const reload = await db.reload.findUnique({ where: { id: reloadId } });
      if (!reload) throw new NotFoundError('No reload with that id.', ['input', 'reloadId']);
      if (reload.sessionId !== principal.sessionId) {
        throw forbidden('A sandbox token can only report reloads of its own session.');
      }
      const message = input.message ? input.message.replaceAll('\0', '').slice(0, MAX_PHASE_MESSAGE) : null;
      // Under the reload's row lock, so reports of one reload are taken one at a time. A report
      // already stored is not stored again: the daemon retries one whose answer it did not get,
      // and that retry can arrive while the first attempt is still running. Phases are listed by
      // time: keep them strictly ordered even when two land in one millisecond.
      const stored = await db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM "Reload" WHERE "id" = ${reloadId}::uuid FOR UPDATE`;
        const same = await tx.reloadPhase.findFirst({
          where: { reloadId, name: input.phase, status: input.status },
          select: { id: true },
        });
        if (same) return false;
        const last = await tx.reloadPhase.findFirst({ where: { reloadId }, orderBy: { at: 'desc' } });
        const at = new Date(Math.max(now(), (last?.at.getTime() ?? 0) + 1));
        await tx.reloadPhase.create({
          data: { reloadId, name: input.phase, status: input.status, message, at },
        });
        return true;
      });
      if (!stored) return db.reload.findUniqueOrThrow({ where: { id: reloadId } });
      if (input.status === 'FAILED') {
        await finish(reload, principal.accountId, 'FAILED', `${input.phase}: ${message ?? 'failed'}`);
      } else if (input.phase === 'CONFIRM_CONFIG' && input.status === 'SUCCEEDED') {
        await finish(reload, principal.accountId, 'SUCCEEDED', null);
      } else {
        await events.reload({ reloadId, sessionId: reload.sessionId, accountId: principal.accountId });
      }
      return db.reload.findUniqueOrThrow({ where: { id: reloadId } });
    },
  };
}
