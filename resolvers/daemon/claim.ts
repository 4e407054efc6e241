// claimBootstrap (R-SBX-3): the daemon fetches the initial prompt and turn-ledger id with its token
// instead of receiving them in the environment. The first claim wins atomically; a restarted daemon
// gets alreadyClaimed: true and no prompt, so the prompt is never sent twice.
import type { Db } from '../platform';
import { NotFoundError } from '../errors';
import type { Principal } from '../auth/principal';
import { assertDaemon } from '../auth/policy';

export interface BootstrapClaim {
  sessionId: string;
  sandboxId: string;
  prompt: string | null;
  turnLedgerId: string | null;
  agent: string;
  alreadyClaimed: boolean;
}

export type ClaimService = ReturnType<typeof createClaimService>;

export function createClaimService(options: { db: Db; now?: () => number }) {
  const { db } = options;
  const now = options.now ?? Date.now;
  return {
    async claim(principal: Principal | null): Promise<BootstrapClaim> {
      assertDaemon(principal, 'Only a sandbox token can claim its bootstrap.');
      const { count } = await db.session.updateMany({
        where: { id: principal.sessionId, bootstrapClaimedAt: null },
        data: { bootstrapClaimedAt: new Date(now()) },
      });
      const session = await db.session.findUnique({
        where: { id: principal.sessionId },
        select: { id: true, prompt: true, turnLedgerId: true, agent: true },
      });
      if (!session) throw new NotFoundError('The session behind this token no longer exists.');
      const first = count === 1;
      return {
        sessionId: session.id,
        sandboxId: principal.sandboxId,
        prompt: first ? session.prompt : null,
        turnLedgerId: first ? session.turnLedgerId : null,
        agent: session.agent,
        alreadyClaimed: !first,
      };
    },
  };
}
