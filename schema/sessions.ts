// Session, ExecutionLease, Reload; session/sessions queries; createSession and stopSession.
import { assertCanReadSession } from '../resolvers/auth/authz';
import { joinedProjects, nodeAccessOf } from '../resolvers/auth/node-access';
import { BaseRefNotFoundError, RepositoryUnreachableError, badUserInput } from '../resolvers/errors';
import { tryParseId } from '../resolvers/ids';
import { ProvisioningPhase } from '../prisma/generated/client/enums';
import { sandboxCostUsd } from '../resolvers/billing/metering';
import { isLeaseLive } from '../resolvers/leases/leases';
import { isAgentReady, sessionRuntimeState } from '../resolvers/sessions/readiness';
import { builder, successType } from './builder';
import {
  ReloadPhaseNameEnum,
  ReloadPhaseStatusEnum,
  ReloadStatusEnum,
  RuntimeStateEnum,
  SessionStatusEnum,
  StopReasonEnum,
} from './enums';
import { COMMON_ERRORS } from './errors';

const ProvisioningPhaseEnum = builder.enumType(ProvisioningPhase, { name: 'ProvisioningPhase' });

export const SessionRef = builder.prismaNode('Session', {
  id: { field: 'id' },
  readAuth: (session, ctx) => {
    if (!ctx.principal) return false;
    assertCanReadSession(ctx.principal, session);
    return true;
  },
  fields: (t) => ({
    sessionId: t.exposeString('id', { description: 'The session UUID; equals branchName.' }),
    status: t.expose('status', {
      type: SessionStatusEnum,
      description:
        'RUNNING means the sandbox is up; the agent inside may still be starting (see agentReady).',
    }),
    runtimeState: t.field({
      type: RuntimeStateEnum,
      nullable: true,
      description:
        "OpenCode's state as the sandbox daemon last reported it while the session is RUNNING; null before the first report and once the session ended.",
      select: { status: true, sandbox: { select: { runtimeState: true } } },
      resolve: (session) => sessionRuntimeState(session.status, session.sandbox?.runtimeState) as never,
    }),
    agentReady: t.boolean({
      description:
        'true when the agent can take a turn: the session is RUNNING and OpenCode is HEALTHY, IDLE or BUSY. sessionUpdated and accountSessions fire when it changes.',
      select: { status: true, sandbox: { select: { runtimeState: true } } },
      resolve: (session) => isAgentReady(session.status, session.sandbox?.runtimeState),
    }),
    branchName: t.exposeString('branchName'),
    baseRef: t.exposeString('baseRef'),
    baseCommit: t.exposeString('baseCommit', { nullable: true }),
    agent: t.exposeString('agent'),
    project: t.relation('project'),
    template: t.relation('template', { nullable: true }),
    sandbox: t.relation('sandbox', { nullable: true }),
    lease: t.relation('lease', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    startedAt: t.expose('startedAt', { type: 'DateTime', nullable: true }),
    stoppedAt: t.expose('stoppedAt', { type: 'DateTime', nullable: true }),
    stopReason: t.expose('stopReason', { type: StopReasonEnum, nullable: true }),
    failureReason: t.exposeString('failureReason', { nullable: true }),
    provisioningPhase: t.field({
      type: ProvisioningPhaseEnum,
      nullable: true,
      description:
        'What a PROVISIONING session waits for (PREPARING_IMAGE: its image is being built); null otherwise.',
      select: { provisioningPhase: true, status: true },
      resolve: (session) => (session.status === 'PROVISIONING' ? session.provisioningPhase : null),
    }),
    seq: t.exposeInt('seq', { description: 'Monotonic per-session change counter.' }),
    costUsd: t.float({
      description: 'Metered cost so far (per second of running sandbox time).',
      select: {
        sandbox: {
          select: {
            provider: true,
            cpu: true,
            memoryGiB: true,
            diskGiB: true,
            runningSeconds: true,
            runningSince: true,
          },
        },
      },
      resolve: (session, _args, ctx) => sandboxCostUsd(session.sandbox, ctx.services.rates),
    }),
    reloads: t.relatedConnection(
      'reloads',
      {
        cursor: 'id',
        defaultSize: 20,
        maxSize: 100,
        query: { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] },
      },
      { name: 'ReloadConnection' },
      { name: 'ReloadEdge' },
    ),
  }),
});

builder.prismaObject('ExecutionLease', {
  fields: (t) => ({
    generation: t.exposeInt('generation'),
    acquiredAt: t.expose('acquiredAt', { type: 'DateTime' }),
    renewedAt: t.expose('renewedAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    releasedAt: t.expose('releasedAt', { type: 'DateTime', nullable: true }),
    live: t.boolean({
      description: 'Held and not expired: the idle reaper leaves the sandbox alone.',
      resolve: (lease) => isLeaseLive(lease),
    }),
  }),
});

builder.prismaNode('Reload', {
  id: { field: 'id' },
  readAuth: async (reload, ctx) => {
    const access = nodeAccessOf(ctx);
    if (!access) return false;
    await access.reload(reload);
    return true;
  },
  fields: (t) => ({
    status: t.expose('status', { type: ReloadStatusEnum }),
    noRepo: t.exposeBoolean('noRepo'),
    force: t.exposeBoolean('force'),
    error: t.exposeString('error', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
    session: t.relation('session'),
    phases: t.relation('phases', { query: { orderBy: [{ at: 'asc' }, { id: 'asc' }] } }),
  }),
});

builder.prismaObject('ReloadPhase', {
  fields: (t) => ({
    name: t.expose('name', { type: ReloadPhaseNameEnum }),
    status: t.expose('status', { type: ReloadPhaseStatusEnum }),
    message: t.exposeString('message', { nullable: true }),
    at: t.expose('at', { type: 'DateTime' }),
  }),
});

builder.queryField('session', (t) =>
  t.prismaField({
    type: 'Session',
    nullable: true,
    description: 'Accepts the global id or the raw session UUID.',
    authScopes: { authenticated: true },
    args: { id: t.arg.id() },
    resolve: (query, _root, args, ctx) => {
      const id = tryParseId(String(args.id), 'Session');
      if (!id) throw badUserInput('Not a valid Session id: pass the global id or the session UUID.', ['id']);
      return ctx.services.sessions.find(id, query);
    },
  }),
);

builder.queryField('sessions', (t) =>
  t.prismaConnection(
    {
      type: 'Session',
      cursor: 'id',
      defaultSize: 20,
      maxSize: 100,
      authScopes: { scope: 'sessions:read' },
      args: {
        status: t.arg({ type: SessionStatusEnum, required: false }),
        projectId: t.arg.id({ required: false }),
      },
      resolve: async (query, _root, args, ctx) => {
        let projectId: string | undefined;
        if (args.projectId != null) {
          projectId = tryParseId(String(args.projectId), 'Project') ?? undefined;
          if (!projectId) throw badUserInput('Not a valid Project id.', ['projectId']);
        }
        const sessions = await ctx.services.sessions.list(
          ctx.principal!,
          { ...(args.status ? { status: args.status } : {}), ...(projectId ? { projectId } : {}) },
          query,
        );
        // The page read each session's project with its account: their templates need no lookup.
        nodeAccessOf(ctx)?.knownProjects(joinedProjects(sessions));
        return sessions;
      },
    },
    { name: 'SessionConnection' },
    { name: 'SessionEdge' },
  ),
);

const CreateSessionInput = builder.inputType('CreateSessionInput', {
  fields: (t) => ({
    projectId: t.id(),
    baseRef: t.string({ required: false, description: "Default: the project's default branch." }),
    templateSlug: t.string({ required: false, description: "Default: the manifest's default template." }),
    prompt: t.string({ required: false }),
    agent: t.string({ required: false, description: 'Default: build.' }),
  }),
});

const CreateSessionSuccess = successType('CreateSessionSuccess', 'session', SessionRef);

builder.mutationField('createSession', (t) =>
  t.field({
    type: CreateSessionSuccess,
    authScopes: { human: true },
    errors: { types: [...COMMON_ERRORS, BaseRefNotFoundError, RepositoryUnreachableError] },
    args: { input: t.arg({ type: CreateSessionInput }) },
    resolve: async (_root, { input }, ctx) => ({
      session: await ctx.services.sessions.create(ctx.principal!, {
        ...input,
        projectId: String(input.projectId),
      }),
    }),
  }),
);

const StopSessionInput = builder.inputType('StopSessionInput', {
  fields: (t) => ({ sessionId: t.id({ description: 'Global id or UUID.' }) }),
});

const StopSessionSuccess = successType('StopSessionSuccess', 'session', SessionRef);

builder.mutationField('stopSession', (t) =>
  t.field({
    type: StopSessionSuccess,
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: StopSessionInput }) },
    resolve: async (_root, { input }, ctx) => ({
      session: await ctx.services.sessions.stop(ctx.principal!, { sessionId: String(input.sessionId) }),
    }),
  }),
);
