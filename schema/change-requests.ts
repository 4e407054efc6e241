// ChangeRequest (R-GIT-4): the node, project.changeRequests, open/merge/close and the
// changeRequestUpdated subscription. Rules live in resolvers/change-requests/.
import { assertCanReadChangeRequest } from '../resolvers/auth/authz';
import type { Principal } from '../resolvers/auth/principal';
import { MergeConflictError, NotFastForwardError } from '../resolvers/change-requests/change-requests';
import { RepositoryUnreachableError, badUserInput } from '../resolvers/errors';
import { tryParseId } from '../resolvers/ids';
import type { Envelope } from '../resolvers/events/channels';
import { builder, successType } from './builder';
import { COMMON_ERRORS, ErrorInterface } from './errors';
import { follow, parseAfter } from './subscriptions';

const ChangeRequestStatusEnum = builder.enumType('ChangeRequestStatus', {
  values: ['OPEN', 'MERGED', 'CLOSED'] as const,
});
const MergeMethodEnum = builder.enumType('MergeMethod', {
  values: ['MERGE', 'SQUASH', 'FAST_FORWARD'] as const,
});

const canRead = (principal: Principal | null, cr: { projectId: string; accountId: string }) => {
  if (!principal) return false;
  assertCanReadChangeRequest(principal, cr);
  return true;
};

export const ChangeRequestRef = builder.prismaNode('ChangeRequest', {
  id: { field: 'id' },
  readAuth: (cr, ctx) => canRead(ctx.principal, cr),
  fields: (t) => ({
    changeRequestId: t.exposeString('id', { description: 'The raw UUID.' }),
    title: t.exposeString('title'),
    description: t.exposeString('description'),
    status: t.expose('status', { type: ChangeRequestStatusEnum }),
    headRef: t.exposeString('headRef', { description: 'The session branch.' }),
    baseRef: t.exposeString('baseRef', { description: 'The default branch it lands on.' }),
    headCommit: t.exposeString('headCommit'),
    baseCommit: t.exposeString('baseCommit'),
    mergeCommit: t.exposeString('mergeCommit', { nullable: true }),
    mergeMethod: t.expose('mergeMethod', { type: MergeMethodEnum, nullable: true }),
    filesChanged: t.exposeInt('filesChanged'),
    additions: t.exposeInt('additions'),
    deletions: t.exposeInt('deletions'),
    mergeable: t.exposeBoolean('mergeable', { description: 'As of the last open or merge attempt.' }),
    conflicts: t.exposeStringList('conflicts'),
    session: t.relation('session'),
    project: t.relation('project'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    mergedAt: t.expose('mergedAt', { type: 'DateTime', nullable: true }),
    closedAt: t.expose('closedAt', { type: 'DateTime', nullable: true }),
  }),
});

builder.prismaObjectField('Project', 'changeRequests', (t) =>
  t.relatedConnection('changeRequests', {
    cursor: 'id',
    args: { status: t.arg({ type: ChangeRequestStatusEnum, required: false }) },
    query: (args) => ({
      where: args.status ? { status: args.status } : {},
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    }),
  }),
);

builder.objectType(MergeConflictError, {
  name: 'MergeConflictError',
  description: 'Merging would conflict; nothing was changed.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof MergeConflictError,
  fields: (t) => ({ conflicts: t.exposeStringList('conflicts') }),
});
builder.objectType(NotFastForwardError, {
  name: 'NotFastForwardError',
  description: 'FAST_FORWARD was asked but the default branch has commits the session branch lacks.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof NotFastForwardError,
  fields: () => ({}),
});

const OpenChangeRequestInput = builder.inputType('OpenChangeRequestInput', {
  fields: (t) => ({
    sessionId: t.id({ description: 'Global id or UUID of the session whose branch is proposed.' }),
    title: t.string(),
    description: t.string({ required: false }),
  }),
});
const MergeChangeRequestInput = builder.inputType('MergeChangeRequestInput', {
  fields: (t) => ({ changeRequestId: t.id(), method: t.field({ type: MergeMethodEnum }) }),
});
const CloseChangeRequestInput = builder.inputType('CloseChangeRequestInput', {
  fields: (t) => ({ changeRequestId: t.id() }),
});

const GIT_ERRORS = [...COMMON_ERRORS, RepositoryUnreachableError];

builder.mutationField('openChangeRequest', (t) =>
  t.field({
    type: successType('OpenChangeRequestSuccess', 'changeRequest', ChangeRequestRef),
    description:
      "Proposes a session's branch for the default branch (the session's sandbox may open its own).",
    authScopes: { authenticated: true },
    errors: { types: GIT_ERRORS },
    args: { input: t.arg({ type: OpenChangeRequestInput }) },
    resolve: async (_root, { input }, ctx) => ({
      changeRequest: await ctx.services.changeRequests.open(ctx.principal!, {
        sessionId: String(input.sessionId),
        title: input.title,
        description: input.description,
      }),
    }),
  }),
);

builder.mutationField('mergeChangeRequest', (t) =>
  t.field({
    type: successType('MergeChangeRequestSuccess', 'changeRequest', ChangeRequestRef),
    description: 'Merges into the default branch upstream: the only way the default branch is written.',
    authScopes: { scope: 'projects:write' },
    errors: { types: [...GIT_ERRORS, MergeConflictError, NotFastForwardError] },
    args: { input: t.arg({ type: MergeChangeRequestInput }) },
    resolve: async (_root, { input }, ctx) => ({
      changeRequest: await ctx.services.changeRequests.merge(ctx.principal!, {
        changeRequestId: String(input.changeRequestId),
        method: input.method,
      }),
    }),
  }),
);

builder.mutationField('closeChangeRequest', (t) =>
  t.field({
    type: successType('CloseChangeRequestSuccess', 'changeRequest', ChangeRequestRef),
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CloseChangeRequestInput }) },
    resolve: async (_root, { input }, ctx) => ({
      changeRequest: await ctx.services.changeRequests.close(ctx.principal!, {
        changeRequestId: String(input.changeRequestId),
      }),
    }),
  }),
);

builder.subscriptionField('changeRequestUpdated', (t) =>
  t.prismaField({
    type: 'ChangeRequest',
    description: 'Changes of one change request (opened, merged, closed).',
    authScopes: { authenticated: true },
    args: {
      id: t.arg.id(),
      after: t.arg.int({ required: false, description: 'Replay events with a greater seq first.' }),
    },
    subscribe: async (_root, args, ctx) => {
      const id = tryParseId(String(args.id), 'ChangeRequest');
      if (!id) throw badUserInput('Not a valid ChangeRequest id.', ['id']);
      const cr = await ctx.services.changeRequests.find(id);
      if (!cr) throw badUserInput('No change request with that id.', ['id']);
      canRead(ctx.principal, cr);
      return follow(ctx, 'changeRequestUpdated', id, parseAfter(args.after), (principal, payload) =>
        canRead(principal, payload),
      );
    },
    resolve: async (query, event: Envelope<'changeRequestUpdated'>, _args, ctx) => {
      const cr = await ctx.services.changeRequests.get(event.key, query);
      canRead(ctx.principal, cr);
      return Object.assign(cr, { status: event.payload.status as never });
    },
  }),
);
