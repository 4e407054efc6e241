// Accounts, tiers and the bootstrap admin (R-AUTH-1, R-RUN-1).
import type { AccountTier } from '../../prisma/generated/client/enums';
import { LIVE_SESSION_STATUSES } from './limits';
import type { Db } from '../platform';
import { assertAccountAdmin } from '../auth/authz';
import { ValidationError } from '../errors';
import { SCOPES } from '../auth/principal';
import type { Principal } from '../auth/principal';
import type { TokenService } from '../auth/tokens';

export type AccountService = ReturnType<typeof createAccountService>;

export function createAccountService(options: { db: Db; tokens: TokenService }) {
  const { db } = options;
  return {
    /** Sessions that count against the account's concurrent-session limit. */
    liveSessionCount(accountId: string): Promise<number> {
      return db.session.count({ where: { accountId, status: { in: [...LIVE_SESSION_STATUSES] } } });
    },

    async update(
      principal: Principal,
      input: {
        tier?: AccountTier | null;
        concurrentSessionLimit?: number | null;
        clearLimit?: boolean | null;
      },
    ) {
      assertAccountAdmin(principal);
      const limit = input.concurrentSessionLimit;
      if (limit != null && (!Number.isInteger(limit) || limit < 0 || limit > 100_000)) {
        throw new ValidationError('concurrentSessionLimit must be an integer from 0 to 100000.', [
          'input',
          'concurrentSessionLimit',
        ]);
      }
      return db.account.update({
        where: { id: principal.accountId },
        data: {
          ...(input.tier ? { tier: input.tier } : {}),
          ...(limit != null ? { concurrentSessionLimit: limit } : {}),
          ...(input.clearLimit ? { concurrentSessionLimit: null } : {}),
        },
      });
    },

    /**
     * First start with an empty database: an admin in a TEAM account and a personal access token
     * holding every scope. Returns the token's secret once; null when users already exist.
     */
    async bootstrap(): Promise<{ secret: string; email: string } | null> {
      if ((await db.user.count()) > 0) return null;
      const email = 'admin@localhost';
      const user = await db.$transaction(async (tx) => {
        // Two processes starting together: the unique email lets exactly one create the admin.
        const account = await tx.account.create({ data: { name: 'Default', tier: 'TEAM' } });
        return tx.user.create({
          data: { accountId: account.id, email, name: 'Admin', role: 'ADMIN', instanceAdmin: true },
        });
      });
      const principal = {
        kind: 'USER' as const,
        userId: user.id,
        accountId: user.accountId,
        isAdmin: true,
        scopes: new Set<string>(SCOPES),
        tokenId: '',
        expiresAt: null,
      };
      const { secret } = await options.tokens.createPersonalAccessToken(principal, {
        name: 'bootstrap',
        scopes: [...SCOPES],
      });
      return { secret, email };
    },
  };
}
