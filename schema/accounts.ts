// Account, User, Viewer, Invitation, ServiceAccount; updateAccount, createAccount (instance admin),
// addMember, removeMember and createInvitation (account admins), acceptInvitation (a new user, with
// the invitation's token). Rules live in resolvers/accounts/.
import { sessionLimit } from '../resolvers/accounts/limits';
import { type Principal, describePrincipal } from '../resolvers/auth/principal';
import { INVITATION_DEFAULT_HOURS, INVITATION_MAX_HOURS } from '../resolvers/accounts/members';
import type { Account, Invitation, User } from '../prisma/generated/client/client';
import { builder, successType } from './builder';
import { AccountTierEnum, TokenKindEnum, UserRoleEnum } from './enums';
import { COMMON_ERRORS } from './errors';
import {
  InvitationExpiredError,
  InvitationUsedError,
  InvitationWrongAccountError,
} from '../resolvers/errors';

export const AccountRef = builder.prismaObject('Account', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    tier: t.expose('tier', { type: AccountTierEnum }),
    concurrentSessionLimit: t.int({
      description: 'Effective limit: the account override, else the tier default.',
      resolve: (account) => sessionLimit(account),
    }),
    members: t.prismaField({
      type: ['User'],
      description: 'Every user of the account, oldest first.',
      authScopes: { human: true },
      resolve: (query, account, _args, ctx) => ctx.services.members.list(ctx.principal!, account.id, query),
    }),
    invitations: t.prismaField({
      type: ['Invitation'],
      description:
        "Account admins: the account's invitations, newest first (their tokens are never shown again).",
      authScopes: { human: true },
      resolve: (query, account, _args, ctx) =>
        ctx.services.members.listInvitations(ctx.principal!, account.id, query),
    }),
    serviceAccounts: t.prismaField({
      type: ['ServiceAccount'],
      description:
        'Named principals of the account that hold singulacomp_sa_ tokens (createServiceAccountToken), by name.',
      authScopes: { human: true },
      resolve: (query, account, _args, ctx) =>
        ctx.services.members.listServiceAccounts(ctx.principal!, account.id, query),
    }),
    liveSessionCount: t.int({
      description: 'Sessions counting against the limit now (PROVISIONING or RUNNING).',
      resolve: (account, _args, ctx) => ctx.services.accounts.liveSessionCount(account.id),
    }),
  }),
});

export const UserRef = builder.prismaObject('User', {
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    isAdmin: t.boolean({ resolve: (user) => user.role === 'ADMIN' }),
    role: t.expose('role', { type: UserRoleEnum }),
    isInstanceAdmin: t.exposeBoolean('instanceAdmin', {
      description: 'The instance admin (the bootstrap user) creates accounts.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const InvitationRef = builder.prismaObject('Invitation', {
  description: 'An invitation to join an account; its one-time token was shown once, at creation.',
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    role: t.expose('role', { type: UserRoleEnum }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    acceptedAt: t.expose('acceptedAt', { type: 'DateTime', nullable: true }),
  }),
});

builder.prismaObject('ServiceAccount', {
  description: 'A named principal of an account holding singulacomp_sa_ tokens.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    activeTokenCount: t.relationCount('tokens', {
      description: 'Tokens of this service account that are neither revoked nor expired.',
      // Counted in the query that reads the service accounts (one for a whole list), under the token
      // service's rule and clock.
      where: (_args, ctx) => ctx.services.tokens.activeWhere(),
    }),
  }),
});

const Viewer = builder.objectRef<Principal>('Viewer').implement({
  description: 'The authenticated principal: a user, a service account or a sandbox.',
  fields: (t) => ({
    kind: t.field({
      type: TokenKindEnum,
      resolve: (p) => describePrincipal(p).tokenKind,
    }),
    scopes: t.stringList({ resolve: (p) => describePrincipal(p).scopes }),
    account: t.prismaField({
      type: 'Account',
      resolve: (query, p, _args, ctx) => ctx.services.accounts.ofViewer(p, query),
    }),
    user: t.prismaField({
      type: 'User',
      nullable: true,
      resolve: (query, p, _args, ctx) => ctx.services.accounts.viewerUser(p, query),
    }),
    sessionId: t.string({
      nullable: true,
      description: 'For a sandbox token: the session it is bound to.',
      resolve: (p) => describePrincipal(p).sessionId,
    }),
    projects: t.prismaConnection(
      {
        type: 'Project',
        cursor: 'id',
        defaultSize: 20,
        maxSize: 100,
        description: "The account's projects, newest first (a sandbox token sees its own project).",
        resolve: (query, p, _args, ctx) => ctx.services.projects.listForViewer(p, query),
      },
      { name: 'ProjectConnection' },
      { name: 'ProjectEdge' },
    ),
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
          ctx.services.tokens.listVisible(p, args.includeRevoked ?? false, query),
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

// --- createAccount (instance admin) ---------------------------------------------------------------

const NewMemberInput = builder.inputType('NewMemberInput', {
  fields: (t) => ({
    email: t.string(),
    name: t.string(),
    role: t.field({ type: UserRoleEnum, required: false, description: 'Default: MEMBER.' }),
  }),
});

const CreateAccountInput = builder.inputType('CreateAccountInput', {
  fields: (t) => ({
    name: t.string(),
    tier: t.field({ type: AccountTierEnum, required: false, description: 'Default: FREE.' }),
    admin: t.field({ type: NewMemberInput, description: "The account's first admin (role is ignored)." }),
  }),
});

const CreateAccountSuccess = builder
  .objectRef<{ account: Account; admin: User; secret: string }>('CreateAccountSuccess')
  .implement({
    fields: (t) => ({
      account: t.field({ type: AccountRef, resolve: (p) => p.account }),
      admin: t.field({ type: UserRef, resolve: (p) => p.admin }),
      secret: t.exposeString('secret', {
        description: "The admin's first personal access token. Shown once; only its hash is stored.",
      }),
    }),
  });

builder.mutationField('createAccount', (t) =>
  t.field({
    type: CreateAccountSuccess,
    description: 'Instance admin only: a new account with its first admin.',
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateAccountInput }) },
    resolve: (_root, { input }, ctx) => ctx.services.members.createAccount(ctx.principal!, input),
  }),
);

// --- addMember / removeMember (account admins) ----------------------------------------------------

const AddMemberSuccess = builder.objectRef<{ member: User; secret: string }>('AddMemberSuccess').implement({
  fields: (t) => ({
    member: t.field({ type: UserRef, resolve: (p) => p.member }),
    secret: t.exposeString('secret', {
      description: "The member's first personal access token. Shown once; only its hash is stored.",
    }),
  }),
});

builder.mutationField('addMember', (t) =>
  t.field({
    type: AddMemberSuccess,
    description: "Account admins: a new user in the caller's account, with a first token (shown once).",
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: NewMemberInput }) },
    resolve: (_root, { input }, ctx) => ctx.services.members.add(ctx.principal!, input),
  }),
);

const RemoveMemberInput = builder.inputType('RemoveMemberInput', {
  fields: (t) => ({ userId: t.id() }),
});

const RemoveMemberSuccess = successType('RemoveMemberSuccess', 'member', UserRef);

builder.mutationField('removeMember', (t) =>
  t.field({
    type: RemoveMemberSuccess,
    description: 'Account admins: removes a user and revokes their tokens; their sessions stay.',
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: RemoveMemberInput }) },
    resolve: async (_root, { input }, ctx) => ({
      member: await ctx.services.members.remove(ctx.principal!, { userId: String(input.userId) }),
    }),
  }),
);

// --- createInvitation (account admins) / acceptInvitation (a new user) ----------------------------

const CreateInvitationInput = builder.inputType('CreateInvitationInput', {
  fields: (t) => ({
    email: t.string({ description: 'The invited person; no user may hold this email yet.' }),
    role: t.field({ type: UserRoleEnum, required: false, description: 'Default: MEMBER.' }),
    expiresInHours: t.int({
      required: false,
      description: `Default: ${INVITATION_DEFAULT_HOURS}; 1 to ${INVITATION_MAX_HOURS}.`,
    }),
  }),
});

const CreateInvitationSuccess = builder
  .objectRef<{ invitation: Invitation; secret: string }>('CreateInvitationSuccess')
  .implement({
    fields: (t) => ({
      invitation: t.field({ type: InvitationRef, resolve: (p) => p.invitation }),
      secret: t.exposeString('secret', {
        description:
          'The one-time invitation token (singulacomp_inv_…) to hand to the invited person. Shown once; only its hash is stored.',
      }),
    }),
  });

builder.mutationField('createInvitation', (t) =>
  t.field({
    type: CreateInvitationSuccess,
    description: "Account admins: invites a new user into the caller's account with a one-time token.",
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateInvitationInput }) },
    resolve: (_root, { input }, ctx) => ctx.services.members.invite(ctx.principal!, input),
  }),
);

const AcceptInvitationInput = builder.inputType('AcceptInvitationInput', {
  fields: (t) => ({
    secret: t.string({ description: 'The invitation token from createInvitation.' }),
    name: t.string({ description: "The new user's display name." }),
  }),
});

const AcceptInvitationSuccess = builder
  .objectRef<{ member: User; account: Account; secret: string }>('AcceptInvitationSuccess')
  .implement({
    fields: (t) => ({
      member: t.field({ type: UserRef, resolve: (p) => p.member }),
      account: t.field({ type: AccountRef, resolve: (p) => p.account }),
      secret: t.exposeString('secret', {
        description: "The new user's first personal access token. Shown once; only its hash is stored.",
      }),
    }),
  });

builder.mutationField('acceptInvitation', (t) =>
  t.field({
    type: AcceptInvitationSuccess,
    description:
      "Needs no credential: the invitation token is one. Creates the invited user (the invitation's email and role) " +
      'with a first personal access token. Single use; refused once expired, and for a caller who already belongs to an account.',
    errors: {
      types: [...COMMON_ERRORS, InvitationUsedError, InvitationExpiredError, InvitationWrongAccountError],
    },
    args: { input: t.arg({ type: AcceptInvitationInput }) },
    resolve: (_root, { input }, ctx) => ctx.services.members.accept(ctx.principal, input),
  }),
);
