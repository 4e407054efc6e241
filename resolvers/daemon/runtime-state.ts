// reportRuntimeState: the daemon's view of OpenCode (STARTING, HEALTHY, BUSY, RETRY, IDLE, ERROR).
// Every report is runtime/turn activity and moves Sandbox.lastActivityAt (the reaper's idle clock);
// an ERROR keeps its message in Sandbox.error (a memory-guard abort arrives this way with the
// SandboxMemoryGuard numbers) until the next ERROR replaces it.
import type { Sandbox } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { ConflictError, ValidationError } from '../errors';
import type { Events } from '../events/events';
import { parseId } from '../ids';
import { assertOwnSession } from '../leases/leases';
import type { Principal } from '../auth/principal';

export const RUNTIME_STATES = ['STARTING', 'HEALTHY', 'BUSY', 'RETRY', 'IDLE', 'ERROR'] as const;
export type RuntimeState = (typeof RUNTIME_STATES)[number];
export const MAX_RUNTIME_MESSAGE = 4_000;

export type RuntimeStateService = ReturnType<typeof createRuntimeStateService>;

export function createRuntimeStateService(options: { db: Db; events: Events; now?: () => number }) {
  const { db, events } = options;
  const now = options.now ?? Date.now;
  return {
    async report(
      principal: Principal | null,
      input: { sessionId: string; state: RuntimeState; message?: string | null },
    ): Promise<Sandbox> {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const sandbox = assertOwnSession(principal, sessionId);
      if (!RUNTIME_STATES.includes(input.state)) {
        throw new ValidationError(`state must be one of ${RUNTIME_STATES.join(', ')}.`, ['input', 'state']);
      }
      const message = input.message ? input.message.replaceAll('\0', '').slice(0, MAX_RUNTIME_MESSAGE) : null;
      const at = new Date(now());
      const before = await db.sandbox.findUnique({
        where: { id: sandbox.sandboxId },
        select: { runtimeState: true },
      });
      const { count } = await db.sandbox.updateMany({
        where: { id: sandbox.sandboxId, sessionId, status: { in: ['CREATING', 'STARTING', 'STARTED'] } },
        data: {
          runtimeState: input.state,
          runtimeStateAt: at,
          lastActivityAt: at,
          ...(input.state === 'ERROR' ? { error: message ?? 'OpenCode reported an error.' } : {}),
        },
      });
      const updated = await db.sandbox.findUnique({ where: { id: sandbox.sandboxId } });
      if (!updated) throw new ConflictError('The sandbox behind this token no longer exists.');
      if (count === 0) {
        throw new ConflictError(`The sandbox is ${updated.status}; runtime state not recorded.`, [
          'input',
          'sessionId',
        ]);
      }
      await events.sandbox(updated, principal!.accountId);
      // Session.runtimeState and agentReady derive from this: the session's watchers hear of it too.
      if (before?.runtimeState !== updated.runtimeState) {
        const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
        if (session) await events.session(session);
      }
      return updated;
    },
  };
}
