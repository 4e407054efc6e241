// Trigger and TriggerRun (R-TRIG-1): project.triggers, trigger.runs, create/update/pause/delete.
// Rules live in resolvers/triggers/.
import { assertCanReadTrigger } from '../resolvers/auth/authz';
import type { Trigger } from '../prisma/generated/client/client';
import { builder, successType } from './builder';
import { COMMON_ERRORS } from './errors';

const TriggerKindEnum = builder.enumType('TriggerKind', { values: ['WEBHOOK', 'SCHEDULE'] as const });
const TriggerRunStatusEnum = builder.enumType('TriggerRunStatus', {
  values: ['SESSION_CREATED', 'SKIPPED_LIMIT', 'FAILED'] as const,
});

export const TriggerRef = builder.prismaNode('Trigger', {
  id: { field: 'id' },
  readAuth: (trigger, ctx) => {
    if (!ctx.principal) return false;
    assertCanReadTrigger(ctx.principal, trigger);
    return true;
  },
  fields: (t) => ({
    triggerId: t.exposeString('id', { description: 'The raw UUID.' }),
    name: t.exposeString('name'),
    kind: t.expose('kind', { type: TriggerKindEnum }),
    schedule: t.exposeString('schedule', { nullable: true, description: 'Cron expression, UTC (SCHEDULE).' }),
    prompt: t.exposeString('prompt', { nullable: true }),
    baseRef: t.exposeString('baseRef', { nullable: true }),
    templateSlug: t.exposeString('templateSlug', { nullable: true }),
    agent: t.exposeString('agent', { nullable: true }),
    paused: t.exposeBoolean('paused'),
    nextFireAt: t.expose('nextFireAt', { type: 'DateTime', nullable: true }),
    refusedDeliveries: t.exposeInt('refusedDeliveries', {
      description:
        'Webhook deliveries refused so far (bad or missing signature or timestamp, outside the window, replayed, paused). Refusals are counted here, not recorded as runs.',
    }),
    lastRefusedAt: t.expose('lastRefusedAt', { type: 'DateTime', nullable: true }),
    lastRefusedCode: t.exposeString('lastRefusedCode', {
      nullable: true,
      description:
        'Why the latest delivery was refused: TIMESTAMP_MISSING, SIGNATURE_INVALID, TIMESTAMP_OUTSIDE_WINDOW, REPLAYED or TRIGGER_PAUSED.',
    }),
    webhookUrl: t.string({
      nullable: true,
      description:
        'Where to POST deliveries (WEBHOOK), with X-SingulaComp-Timestamp (Unix seconds, accepted within the server\'s window, 300 s by default) and X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed with the webhook secret>.',
      resolve: (trigger, _args, ctx) =>
        trigger.kind === 'WEBHOOK'
          ? `${(ctx.services.config.publicUrl ?? '').replace(/\/+$/, '')}/v1/triggers/${trigger.id}/webhook`
          : null,
    }),
    project: t.relation('project'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    runs: t.relatedConnection('runs', {
      cursor: 'id',
      query: { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] },
    }),
  }),
});

builder.prismaObject('TriggerRun', {
  fields: (t) => ({
    id: t.exposeID('id'),
    status: t.expose('status', { type: TriggerRunStatusEnum }),
    reason: t.exposeString('reason', { nullable: true }),
    sessionId: t.exposeString('sessionId', { nullable: true }),
    scheduledFor: t.expose('scheduledFor', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.prismaObjectField('Project', 'triggers', (t) =>
  t.relatedConnection('triggers', { cursor: 'id', query: { orderBy: [{ name: 'asc' }, { id: 'asc' }] } }),
);

const CreateTriggerInput = builder.inputType('CreateTriggerInput', {
  fields: (t) => ({
    projectId: t.id(),
    name: t.string(),
    kind: t.field({ type: TriggerKindEnum }),
    schedule: t.string({ required: false, description: 'Cron expression, UTC; required for SCHEDULE.' }),
    prompt: t.string({ required: false }),
    baseRef: t.string({
      required: false,
      description: "Default: the project's default branch at fire time.",
    }),
    templateSlug: t.string({ required: false }),
    agent: t.string({ required: false }),
  }),
});

const CreateTriggerSuccess = builder
  .objectRef<{ trigger: Trigger; webhookSecret: string | null }>('CreateTriggerSuccess')
  .implement({
    fields: (t) => ({
      trigger: t.field({ type: TriggerRef, resolve: (p) => p.trigger }),
      webhookSecret: t.exposeString('webhookSecret', {
        nullable: true,
        description: 'HMAC-SHA256 key of a WEBHOOK trigger. Shown once.',
      }),
    }),
  });

builder.mutationField('createTrigger', (t) =>
  t.field({
    type: CreateTriggerSuccess,
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateTriggerInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.triggers.create(ctx.principal!, { ...input, projectId: String(input.projectId) }),
  }),
);

const UpdateTriggerInput = builder.inputType('UpdateTriggerInput', {
  fields: (t) => ({
    triggerId: t.id(),
    name: t.string({ required: false }),
    schedule: t.string({ required: false }),
    prompt: t.string({ required: false }),
    baseRef: t.string({ required: false }),
    templateSlug: t.string({ required: false }),
    agent: t.string({ required: false }),
  }),
});

builder.mutationField('updateTrigger', (t) =>
  t.field({
    type: successType('UpdateTriggerSuccess', 'trigger', TriggerRef),
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: UpdateTriggerInput }) },
    resolve: async (_root, { input }, ctx) => ({
      trigger: await ctx.services.triggers.update(ctx.principal!, {
        ...input,
        triggerId: String(input.triggerId),
      }),
    }),
  }),
);

const PauseTriggerInput = builder.inputType('PauseTriggerInput', {
  fields: (t) => ({
    triggerId: t.id(),
    paused: t.boolean({ description: 'true pauses, false resumes.' }),
  }),
});

builder.mutationField('pauseTrigger', (t) =>
  t.field({
    type: successType('PauseTriggerSuccess', 'trigger', TriggerRef),
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: PauseTriggerInput }) },
    resolve: async (_root, { input }, ctx) => ({
      trigger: await ctx.services.triggers.setPaused(ctx.principal!, {
        triggerId: String(input.triggerId),
        paused: input.paused,
      }),
    }),
  }),
);

const DeleteTriggerInput = builder.inputType('DeleteTriggerInput', {
  fields: (t) => ({ triggerId: t.id() }),
});

builder.mutationField('deleteTrigger', (t) =>
  t.field({
    type: builder.objectRef<{ triggerId: string }>('DeleteTriggerSuccess').implement({
      fields: (f) => ({ triggerId: f.exposeString('triggerId') }),
    }),
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteTriggerInput }) },
    resolve: async (_root, { input }, ctx) => ({
      triggerId: (await ctx.services.triggers.remove(ctx.principal!, { triggerId: String(input.triggerId) }))
        .id,
    }),
  }),
);
