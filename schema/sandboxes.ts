// Sandbox and TelemetrySample; the sandbox query.
import type { Principal } from '../resolvers/auth/principal';
import { assertCanReadSandbox } from '../resolvers/auth/authz';
import { badUserInput } from '../resolvers/errors';
import { tryParseId } from '../resolvers/ids';
import { sandboxCostUsd } from '../resolvers/billing/metering';
import { isLeaseLive } from '../resolvers/leases/leases';
import { builder } from './builder';
import { ProviderEnum, SandboxStatusEnum, StopReasonEnum, TelemetryReasonEnum } from './enums';

/** Scope-auth adapter: false for anonymous callers, the service's typed refusal otherwise. */
export function canReadSandbox(
  principal: Principal | null,
  sandbox: { sessionId: string; accountId: string },
): boolean {
  if (!principal) return false;
  assertCanReadSandbox(principal, sandbox);
  return true;
}

export const SandboxRef = builder.prismaNode('Sandbox', {
  id: { field: 'id' },
  readAuth: (sandbox, ctx) => canReadSandbox(ctx.principal, sandbox),
  fields: (t) => ({
    sandboxId: t.exposeString('id', { description: 'The raw UUID.' }),
    status: t.expose('status', { type: SandboxStatusEnum }),
    provider: t.expose('provider', { type: ProviderEnum }),
    providerSandboxId: t.exposeString('providerSandboxId', { nullable: true }),
    cpu: t.exposeInt('cpu'),
    memoryGiB: t.exposeInt('memoryGiB'),
    diskGiB: t.exposeInt('diskGiB'),
    snapshot: t.relation('snapshot', { nullable: true }),
    session: t.relation('session'),
    lease: t.relation('lease', { nullable: true }),
    runtimeState: t.exposeString('runtimeState', { nullable: true }),
    error: t.exposeString('error', { nullable: true }),
    warnings: t.exposeStringList('warnings', {
      description: "Clamps applied to the template's spec by the provider's own caps (R-SBX-4).",
    }),
    costUsd: t.float({
      description: 'Metered cost so far (per second of running time, at the provider rate).',
      resolve: (sandbox, _args, ctx) => sandboxCostUsd(sandbox, ctx.services.rates),
    }),
    stopReason: t.expose('stopReason', { type: StopReasonEnum, nullable: true }),
    keptAliveBecause: t.string({
      nullable: true,
      description: 'Why the idle reaper leaves this sandbox alone right now (null: nothing keeps it).',
      select: { lease: true },
      resolve: (sandbox) => {
        const lease = sandbox.lease;
        if (lease && isLeaseLive(lease)) {
          return `execution lease generation ${lease.generation} held until ${lease.expiresAt.toISOString()}`;
        }
        return null;
      },
    }),
    leaseExpiresAt: t.field({
      type: 'DateTime',
      nullable: true,
      select: { lease: true },
      resolve: (sandbox) => (sandbox.lease && !sandbox.lease.releasedAt ? sandbox.lease.expiresAt : null),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    startedAt: t.expose('startedAt', { type: 'DateTime', nullable: true }),
    stoppedAt: t.expose('stoppedAt', { type: 'DateTime', nullable: true }),
    latestTelemetry: t.prismaField({
      type: 'TelemetrySample',
      nullable: true,
      resolve: (query, sandbox, _args, ctx) => ctx.services.telemetry.latest(sandbox.id, query),
    }),
    telemetry: t.relatedConnection(
      'telemetry',
      {
        cursor: 'id',
        defaultSize: 20,
        maxSize: 100,
        query: { orderBy: [{ at: 'desc' }, { id: 'desc' }] },
      },
      { name: 'TelemetrySampleConnection' },
      { name: 'TelemetrySampleEdge' },
    ),
  }),
});

export const TelemetrySampleRef = builder.prismaObject('TelemetrySample', {
  fields: (t) => ({
    at: t.expose('at', { type: 'DateTime' }),
    memoryUsedBytes: t.exposeFloat('memoryUsedBytes'),
    memoryLimitBytes: t.exposeFloat('memoryLimitBytes'),
    load1: t.exposeFloat('load1'),
    diskUsedBytes: t.exposeFloat('diskUsedBytes'),
    diskTotalBytes: t.exposeFloat('diskTotalBytes'),
    daemonRssBytes: t.exposeFloat('daemonRssBytes'),
    opencodeRssBytes: t.exposeFloat('opencodeRssBytes'),
    reason: t.expose('reason', { type: TelemetryReasonEnum }),
  }),
});

builder.queryField('sandbox', (t) =>
  t.prismaField({
    type: 'Sandbox',
    nullable: true,
    authScopes: { authenticated: true },
    args: { id: t.arg.id() },
    resolve: (query, _root, args, ctx) => {
      const id = tryParseId(String(args.id), 'Sandbox');
      if (!id) throw badUserInput('Not a valid Sandbox id.', ['id']);
      return ctx.services.sandboxInfo.find(id, query);
    },
  }),
);
