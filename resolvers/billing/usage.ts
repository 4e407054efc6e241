// Account usage over a time range (R-SBX-5). Every running interval of a sandbox is a
// SandboxInterval row, so a range clips intervals exactly (an interval still running is metered up
// to now). Seconds are summed per sandbox, each sandbox's total is metered like its session's cost
// (started seconds billed, resources × provider rate), and sandbox costs are summed in micro-dollars.
// Cost is computed for every account; it is billed only for TEAM accounts.
import type { AccountTier } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { assertScope } from '../auth/authz';
import { type RateTable, costMicroUsd } from './cost';
import { badUserInput } from '../errors';
import type { Principal } from '../auth/principal';
import type { ProviderName } from '../providers/types';

export const BILLED_TIERS: readonly AccountTier[] = ['TEAM'];
/** Longest range one query may cover. */
export const MAX_USAGE_RANGE_DAYS = 400;

export interface ProviderUsage {
  provider: ProviderName;
  sandboxCount: number;
  seconds: number;
  costUsd: number;
  billedUsd: number;
}

export interface AccountUsage {
  from: Date;
  to: Date;
  tier: AccountTier;
  billable: boolean;
  seconds: number;
  costUsd: number;
  billedUsd: number;
  providers: ProviderUsage[];
}

export interface UsageInterval {
  sandboxId: string;
  provider: ProviderName;
  cpu: number;
  memoryGiB: number;
  diskGiB: number;
  startedAt: Date;
  stoppedAt: Date | null;
}

/** Seconds of `interval` inside [from, to), an open interval ending at `now`. */
export function clippedSeconds(
  interval: Pick<UsageInterval, 'startedAt' | 'stoppedAt'>,
  from: Date,
  to: Date,
  now: Date,
): number {
  const start = Math.max(interval.startedAt.getTime(), from.getTime());
  const end = Math.min((interval.stoppedAt ?? now).getTime(), to.getTime(), now.getTime());
  return Math.max(0, end - start) / 1000;
}

/** Pure aggregation, shared by the service and its tests. */
export function aggregateUsage(
  intervals: readonly UsageInterval[],
  range: { from: Date; to: Date; now: Date },
  rates: RateTable,
  tier: AccountTier,
): AccountUsage {
  const bySandbox = new Map<string, { interval: UsageInterval; seconds: number }>();
  for (const interval of intervals) {
    const seconds = clippedSeconds(interval, range.from, range.to, range.now);
    if (seconds <= 0) continue;
    const entry = bySandbox.get(interval.sandboxId);
    if (entry) entry.seconds += seconds;
    else bySandbox.set(interval.sandboxId, { interval, seconds });
  }
  const byProvider = new Map<ProviderName, { sandboxes: number; seconds: number; micro: number }>();
  for (const { interval, seconds } of bySandbox.values()) {
    const micro = costMicroUsd({
      provider: interval.provider,
      spec: { cpu: interval.cpu, memoryGiB: interval.memoryGiB, diskGiB: interval.diskGiB },
      seconds,
      rates,
    });
    const total = byProvider.get(interval.provider) ?? { sandboxes: 0, seconds: 0, micro: 0 };
    total.sandboxes += 1;
    total.seconds += seconds;
    total.micro += micro;
    byProvider.set(interval.provider, total);
  }
  const billable = BILLED_TIERS.includes(tier);
  const providers = [...byProvider.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([provider, total]) => ({
      provider,
      sandboxCount: total.sandboxes,
      seconds: total.seconds,
      costUsd: total.micro / 1_000_000,
      billedUsd: billable ? total.micro / 1_000_000 : 0,
    }));
  const micro = [...byProvider.values()].reduce((sum, total) => sum + total.micro, 0);
  return {
    from: range.from,
    to: range.to,
    tier,
    billable,
    seconds: providers.reduce((sum, p) => sum + p.seconds, 0),
    costUsd: micro / 1_000_000,
    billedUsd: billable ? micro / 1_000_000 : 0,
    providers,
  };
}

export type UsageService = ReturnType<typeof createUsageService>;

export function createUsageService(options: { db: Db; rates: RateTable; now?: () => Date }) {
  const { db } = options;
  const now = options.now ?? (() => new Date());
  return {
    async accountUsage(principal: Principal, input: { from: Date; to: Date }): Promise<AccountUsage> {
      assertScope(principal, 'sessions:read');
      const { from, to } = input;
      if (!(to.getTime() > from.getTime())) throw badUserInput('`to` must be after `from`.', ['to']);
      if (to.getTime() - from.getTime() > MAX_USAGE_RANGE_DAYS * 86_400_000) {
        throw badUserInput(`The range may cover at most ${MAX_USAGE_RANGE_DAYS} days.`, ['to']);
      }
      const [account, intervals] = await Promise.all([
        db.account.findUniqueOrThrow({ where: { id: principal.accountId }, select: { tier: true } }),
        db.sandboxInterval.findMany({
          where: {
            accountId: principal.accountId,
            startedAt: { lt: to },
            OR: [{ stoppedAt: null }, { stoppedAt: { gt: from } }],
          },
          select: {
            sandboxId: true,
            provider: true,
            cpu: true,
            memoryGiB: true,
            diskGiB: true,
            startedAt: true,
            stoppedAt: true,
          },
        }),
      ]);
      return aggregateUsage(intervals, { from, to, now: now() }, options.rates, account.tier);
    },
  };
}
