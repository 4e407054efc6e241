// Tier limits (R-AUTH-1).
import type { AccountTier } from '../../prisma/generated/client/enums';

export const TIER_SESSION_LIMITS: Record<AccountTier, number> = {
  FREE: 2,
  PRO: 10,
  TEAM: 50,
  ENTERPRISE: 500,
};

export function sessionLimit(account: { tier: AccountTier; concurrentSessionLimit: number | null }): number {
  return account.concurrentSessionLimit ?? TIER_SESSION_LIMITS[account.tier];
}

/** Session statuses that count against the concurrent-session limit. */
export const LIVE_SESSION_STATUSES = ['PROVISIONING', 'RUNNING'] as const;
