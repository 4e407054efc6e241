// Account, User, Viewer and updateAccount.
import { sessionLimit } from '../resolvers/accounts/limits';
import type { Principal } from '../resolvers/auth/principal';
import { builder, successType } from './builder';
import { AccountTierEnum, TokenKindEnum } from './enums';
import { COMMON_ERRORS } from './errors';

export const AccountRef = builder.prismaObject('Account', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    tier: t.expose('tier', { type: AccountTierEnum }),
    concurrentSessionLimit: t.int({
      description: 'Effective limit: the account override, else the tier default.',
      resolve: (account) => sessionLimit(account),
    }),
    liveSessionCount: t.int({
      resolve: (account, _args, ctx) =>
        ctx.services.db.session.count({
          where: { accountId: account.id, status: { in: ['PROVISIONING', 'RUNNING'] } },
        }),
    }),
  }),
});

builder.prismaObject('User', {
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    isAdmin: t.boolean({ resolve: (user) => user.role === 'ADMIN' }),
  }),
});

const Viewer = builder.objectRef<Principal>('Viewer').implement({
  description: 'The authenticated principal: a user, a service account or a sandbox.',
  fields: (t) => ({
    kind: t.field({
      type: TokenKindEnum,
      resolve: (p) =>
        p.kind === 'USER' ? 'PERSONAL_ACCESS' : p.kind === 'SERVICE_ACCOUNT' ? 'SERVICE_ACCOUNT' : 'SANDBOX',
    }),
    scopes: t.stringList({ resolve: (p) => (p.kind === 'SANDBOX' ? ['sandbox'] : [...p.scopes].sort()) }),
    account: t.prismaField({
      type: 'Account',
      resolve: (query, p, _args, ctx) =>
        ctx.services.db.account.findUniqueOrThrow({ ...query, where: { id: p.accountId } }),
    }),
    user: t.prismaField({
      type: 'User',
      nullable: true,
      resolve: (query, p, _args, ctx) =>
        p.kind === 'SERVICE_ACCOUNT' || !p.userId
          ? null
          : ctx.services.db.user.findUnique({ ...query, where: { id: p.userId } }),
    }),
    sessionId: t.string({
      nullable: true,
      description: 'For a sandbox token: the session it is bound to.',
      resolve: (p) => (p.kind === 'SANDBOX' ? p.sessionId : null),
    }),
    tokenExpiresAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.expiresAt }),
    tokens: t.prismaConnection(
      {
        type: 'Token',
        cursor: 'id',
        defaultSize: 20,
        maxSize: 100,
        description:
          'Personal tokens of this user; for admins, every user and service-account token of the account. Needs tokens:read.',
        args: { includeRevoked: t.arg.boolean({ required: false }) },
        resolve: (query, p, args, ctx) =>
          ctx.services.db.token.findMany({
            ...query,
            where: ctx.services.tokens.visibleTokensWhere(p, args.includeRevoked ?? false),
            orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
          }),
      },
      { name: 'TokenConnection' },
      { name: 'TokenEdge' },
    ),
  }),
});

builder.queryField('viewer', (t) =>
  t.field({
    type: Viewer,
    authScopes: { authenticated: true },
    resolve: (_root, _args, ctx) => ctx.principal!,
  }),
);

const UpdateAccountInput = builder.inputType('UpdateAccountInput', {
  fields: (t) => ({
    tier: t.field({ type: AccountTierEnum, required: false }),
    concurrentSessionLimit: t.int({ required: false }),
    clearLimit: t.boolean({ required: false, description: 'Drop the override and use the tier default.' }),
  }),
});

const UpdateAccountSuccess = successType('UpdateAccountSuccess', 'account', AccountRef);

builder.mutationField('updateAccount', (t) =>
  t.field({
    type: UpdateAccountSuccess,
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: UpdateAccountInput }) },
    resolve: async (_root, { input }, ctx) => ({
      account: await ctx.services.accounts.update(ctx.principal!, input),
    }),
  }),
);
