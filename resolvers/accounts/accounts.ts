// Accounts, tiers and the bootstrap admin (R-AUTH-1, R-RUN-1).
import { randomUUID } from 'node:crypto';
import type { AccountTier } from '../../prisma/generated/client/enums';
import { LIVE_SESSION_STATUSES } from './limits';
import type { Db } from '../platform';
import { assertAccountAdmin } from '../auth/authz';
import { ValidationError, isUniqueViolation } from '../errors';
import { type Principal, SCOPES, onBehalfOf } from '../auth/principal';
import { newPersonalAccessToken } from '../auth/tokens';

export type AccountService = ReturnType<typeof createAccountService>;

export function createAccountService(options: { db: Db }) {
  const { db } = options;
  return {
    /** Sessions that count against the account's concurrent-session limit. */
    liveSessionCount(accountId: string): Promise<number> {
      return db.session.count({ where: { accountId, status: { in: [...LIVE_SESSION_STATUSES] } } });
    },

    /** viewer.account: the caller's own account (`query`: the GraphQL selection). */
    ofViewer<Q extends object>(principal: Principal, query?: Q) {
      return db.account.findUniqueOrThrow({ ...(query ?? {}), where: { id: principal.accountId } });
    },

    /** viewer.user: the user the caller acts for; null for a service account without one. */
    async viewerUser<Q extends object>(principal: Principal, query?: Q) {
      const userId = onBehalfOf(principal);
      return userId === null ? null : db.user.findUnique({ ...(query ?? {}), where: { id: userId } });
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
    /**
     * The first admin of a fresh install: account, user and token in one transaction, so an admin is
     * never left without the token that is its only way in. Null when users exist, or when another
     * process starting at the same time created the admin (the unique email lets exactly one win).
     * Any other error is thrown: it is not a sign that the admin exists.
     */
    async bootstrap(): Promise<{ secret: string; email: string } | null> {
      if ((await db.user.count()) > 0) return null;
      const email = 'admin@localhost';
      const accountId = randomUUID();
      const userId = randomUUID();
      const { secret, data } = newPersonalAccessToken(
        { accountId, userId },
        { name: 'bootstrap', scopes: [...SCOPES] },
      );
      try {
        await db.$transaction([
          db.account.create({ data: { id: accountId, name: 'Default', tier: 'TEAM' } }),
          db.user.create({
            data: { id: userId, accountId, email, name: 'Admin', role: 'ADMIN', instanceAdmin: true },
          }),
          db.token.create({ data }),
        ]);
      } catch (error) {
        if (isUniqueViolation(error)) return null;
        throw error;
      }
      return { secret, email };
    },
  };
}
