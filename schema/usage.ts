// accountUsage: per-provider running seconds and cost of the viewer's account over a time range.
import type { AccountUsage, ProviderUsage } from '../resolvers/billing/usage';
import { builder } from './builder';
import { AccountTierEnum, ProviderEnum } from './enums';

const ProviderUsageRef = builder.objectRef<ProviderUsage>('ProviderUsage').implement({
  fields: (t) => ({
    provider: t.expose('provider', { type: ProviderEnum }),
    sandboxCount: t.exposeInt('sandboxCount', { description: 'Sandboxes that ran inside the range.' }),
    seconds: t.exposeFloat('seconds', { description: 'Running seconds inside the range.' }),
    costUsd: t.exposeFloat('costUsd'),
    billedUsd: t.exposeFloat('billedUsd', { description: 'costUsd for TEAM accounts, else 0.' }),
  }),
});

const AccountUsageRef = builder.objectRef<AccountUsage>('AccountUsage').implement({
  description: 'Metered sandbox time (running intervals clipped to the range) and its cost.',
  fields: (t) => ({
    from: t.expose('from', { type: 'DateTime' }),
    to: t.expose('to', { type: 'DateTime' }),
    tier: t.expose('tier', { type: AccountTierEnum }),
    billable: t.exposeBoolean('billable', { description: 'Only TEAM accounts are billed (R-SBX-5).' }),
    seconds: t.exposeFloat('seconds'),
    costUsd: t.exposeFloat('costUsd', { description: 'Computed for every account.' }),
    billedUsd: t.exposeFloat('billedUsd', { description: 'What the account is charged: 0 unless TEAM.' }),
    providers: t.field({ type: [ProviderUsageRef], resolve: (usage) => usage.providers }),
  }),
});

builder.queryField('accountUsage', (t) =>
  t.field({
    type: AccountUsageRef,
    description: "Usage of the viewer's account in [from, to).",
    authScopes: { human: true },
    args: {
      from: t.arg({ type: 'DateTime', required: true }),
      to: t.arg({ type: 'DateTime', required: true }),
    },
    resolve: (_root, args, ctx) =>
      ctx.services.usage.accountUsage(ctx.principal!, { from: args.from, to: args.to }),
  }),
);
