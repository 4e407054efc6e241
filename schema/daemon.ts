// The daemon's mutations (docs/agent-api.md): claimBootstrap, renewLease, releaseLease,
// reportTelemetry, reportRuntimeState, reportReloadPhase — sandbox token only, each for its own
// session/sandbox — and reloadSession for users. Logic lives in resolvers/ (leases, telemetry,
// runtime-state, claim, reloads).
import { LeaseFencedError } from '../resolvers/errors';
import { builder } from './builder';
import { ReloadPhaseNameEnum, ReloadPhaseStatusEnum, RuntimeStateEnum, TelemetryReasonEnum } from './enums';
import { COMMON_ERRORS } from './errors';
import { SandboxRef, TelemetrySampleRef } from './sandboxes';

// --- claimBootstrap -------------------------------------------------------------------------------

const ClaimBootstrapSuccess = builder
  .objectRef<import('../resolvers/daemon/claim').BootstrapClaim>('ClaimBootstrapSuccess')
  .implement({
    description: 'prompt and turnLedgerId are returned on the first claim only.',
    fields: (t) => ({
      sessionId: t.exposeString('sessionId'),
      sandboxId: t.exposeString('sandboxId'),
      prompt: t.exposeString('prompt', { nullable: true }),
      turnLedgerId: t.exposeString('turnLedgerId', { nullable: true }),
      agent: t.exposeString('agent'),
      alreadyClaimed: t.exposeBoolean('alreadyClaimed'),
    }),
  });

builder.mutationField('claimBootstrap', (t) =>
  t.field({
    type: ClaimBootstrapSuccess,
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    resolve: (_root, _args, ctx) => ctx.services.claims.claim(ctx.principal),
  }),
);

// --- renewLease / releaseLease --------------------------------------------------------------------

type LeaseShape = import('../prisma/generated/client/client').ExecutionLease;

function leaseSuccess(name: string) {
  return builder.objectRef<{ lease: LeaseShape }>(name).implement({
    fields: (t) => ({
      lease: t.prismaField({ type: 'ExecutionLease', resolve: (_query, parent) => parent.lease }),
    }),
  });
}

const RenewLeaseInput = builder.inputType('RenewLeaseInput', {
  fields: (t) => ({
    sessionId: t.id({ description: 'Global id or UUID of the sandbox token’s own session.' }),
    generation: t.int({
      required: false,
      description: 'The generation held; omit to acquire (generation + 1).',
    }),
    acquisition: t.string({
      required: false,
      description:
        'With generation omitted: a key (1–64 letters, digits, "-", "_") the daemon picks for one acquire and repeats on its retries. When the live lease was acquired with this key, it is answered again with the same generation instead of moving on.',
    }),
  }),
});

builder.mutationField('renewLease', (t) =>
  t.field({
    type: leaseSuccess('RenewLeaseSuccess'),
    authScopes: { sandbox: true },
    errors: { types: [...COMMON_ERRORS, LeaseFencedError] },
    args: { input: t.arg({ type: RenewLeaseInput }) },
    resolve: async (_root, { input }, ctx) => ({
      lease: await ctx.services.leases.renew(ctx.principal, {
        sessionId: String(input.sessionId),
        generation: input.generation,
        acquisition: input.acquisition,
      }),
    }),
  }),
);

const ReleaseLeaseInput = builder.inputType('ReleaseLeaseInput', {
  fields: (t) => ({ sessionId: t.id(), generation: t.int() }),
});

builder.mutationField('releaseLease', (t) =>
  t.field({
    type: leaseSuccess('ReleaseLeaseSuccess'),
    authScopes: { sandbox: true },
    errors: { types: [...COMMON_ERRORS, LeaseFencedError] },
    args: { input: t.arg({ type: ReleaseLeaseInput }) },
    resolve: async (_root, { input }, ctx) => ({
      lease: await ctx.services.leases.release(ctx.principal, {
        sessionId: String(input.sessionId),
        generation: input.generation,
      }),
    }),
  }),
);

// --- reportTelemetry ------------------------------------------------------------------------------

const ReportTelemetryInput = builder.inputType('ReportTelemetryInput', {
  fields: (t) => ({
    sandboxId: t.id(),
    memoryUsedBytes: t.float(),
    memoryLimitBytes: t.float(),
    load1: t.float(),
    diskUsedBytes: t.float(),
    diskTotalBytes: t.float(),
    daemonRssBytes: t.float(),
    opencodeRssBytes: t.float(),
    reason: t.field({ type: TelemetryReasonEnum }),
  }),
});

const ReportTelemetrySuccess = builder
  .objectRef<{ sample: import('../prisma/generated/client/client').TelemetrySample }>(
    'ReportTelemetrySuccess',
  )
  .implement({
    fields: (t) => ({
      // The stored row is already in hand (no relations to load): no Prisma query to derive per report.
      sample: t.field({ type: TelemetrySampleRef, resolve: (parent) => parent.sample }),
    }),
  });

builder.mutationField('reportTelemetry', (t) =>
  t.field({
    type: ReportTelemetrySuccess,
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReportTelemetryInput }) },
    resolve: async (_root, { input }, ctx) => ({
      sample: await ctx.services.telemetry.report(ctx.principal, {
        ...input,
        sandboxId: String(input.sandboxId),
      }),
    }),
  }),
);

// --- reportRuntimeState ---------------------------------------------------------------------------

const ReportRuntimeStateInput = builder.inputType('ReportRuntimeStateInput', {
  fields: (t) => ({
    sessionId: t.id(),
    state: t.field({ type: RuntimeStateEnum }),
    message: t.string({
      required: false,
      description: 'Why, for ERROR (e.g. the SandboxMemoryGuard numbers).',
    }),
  }),
});

builder.mutationField('reportRuntimeState', (t) =>
  t.field({
    type: builder.objectRef<{ sandbox: unknown }>('ReportRuntimeStateSuccess').implement({
      fields: (f) => ({
        sandbox: f.field({ type: SandboxRef, resolve: (parent) => parent.sandbox as never }),
      }),
    }),
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReportRuntimeStateInput }) },
    resolve: async (_root, { input }, ctx) => ({
      sandbox: await ctx.services.runtimeState.report(ctx.principal, {
        sessionId: String(input.sessionId),
        state: input.state,
        message: input.message,
      }),
    }),
  }),
);

// --- reloads --------------------------------------------------------------------------------------

type ReloadShape = import('../prisma/generated/client/client').Reload;

function reloadSuccess(name: string) {
  return builder.objectRef<{ reload: ReloadShape }>(name).implement({
    fields: (t) => ({
      reload: t.prismaField({ type: 'Reload', resolve: (_query, parent) => parent.reload }),
    }),
  });
}

const ReportReloadPhaseInput = builder.inputType('ReportReloadPhaseInput', {
  fields: (t) => ({
    reloadId: t.id(),
    phase: t.field({ type: ReloadPhaseNameEnum }),
    status: t.field({ type: ReloadPhaseStatusEnum }),
    message: t.string({ required: false }),
  }),
});

builder.mutationField('reportReloadPhase', (t) =>
  t.field({
    type: reloadSuccess('ReportReloadPhaseSuccess'),
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReportReloadPhaseInput }) },
    resolve: async (_root, { input }, ctx) => ({
      reload: await ctx.services.reloads.reportPhase(ctx.principal, {
        reloadId: String(input.reloadId),
        phase: input.phase,
        status: input.status,
        message: input.message,
      }),
    }),
  }),
);

const ReloadSessionInput = builder.inputType('ReloadSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ description: 'Global id or UUID.' }),
    noRepo: t.boolean({ required: false, description: 'Skip refreshing the repository. Default: false.' }),
    force: t.boolean({ required: false, description: 'End a running turn. Default: false.' }),
  }),
});

builder.mutationField('reloadSession', (t) =>
  t.field({
    type: reloadSuccess('ReloadSessionSuccess'),
    description: 'Users with sessions:write, or the session’s own sandbox token.',
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReloadSessionInput }) },
    resolve: async (_root, { input }, ctx) => ({
      reload: await ctx.services.reloads.start(ctx.principal!, {
        sessionId: String(input.sessionId),
        noRepo: input.noRepo,
        force: input.force,
      }),
    }),
  }),
);
