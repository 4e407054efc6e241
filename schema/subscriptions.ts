// Live updates over graphql-ws (SPEC §11). Every subscription takes `after`: events with a greater
// seq are replayed from the event log first, then the stream continues live with no duplicate and
// no gap. Each `next` message carries `extensions.seq` (the value to resume from). Capability is
// checked on subscribe and again for every event; an expired token's socket is closed (4401).
import type { Prisma } from '../prisma/generated/client/client';
import { assertCanReadSession } from '../resolvers/auth/authz';
import { badUserInput, forbidden } from '../resolvers/errors';
import { tryParseId } from '../resolvers/ids';
import type { Principal } from '../resolvers/auth/principal';
import { can } from '../resolvers/auth/policy';
import type { Channels, Envelope, StreamObserver, StreamTopic } from '../resolvers/events/channels';
import type { SessionSnapshot } from '../resolvers/sessions/readiness';
import { type ConnectionHandle, type Context, builder } from './builder';
import { canReadSandbox } from './sandboxes';

const AFTER_DESCRIPTION =
  'Replay the events with a greater seq first (from `extensions.seq` of the last event you received), then continue live.';

export function parseAfter(after: number | null | undefined): number | null {
  if (after === null || after === undefined) return null;
  if (after < 0) throw badUserInput('after must be a seq you received (0 or more).', ['after']);
  return after;
}

/** Per-event checks of one subscription: the token is still valid, the reader may see the event. */
class Follower<T extends StreamTopic> implements StreamObserver {
  constructor(
    private readonly ctx: Context,
    private readonly check: (principal: Principal, payload: Channels[T]) => void,
  ) {}

  delivered(event: Envelope): void {
    const connection = this.ctx.connection;
    connection?.assertValid();
    this.check(this.ctx.principal!, event.payload as Channels[T]);
    connection?.delivered(event.seq);
  }
}

/** On a WebSocket, a reader too slow for its buffer gets its socket closed (4420). */
class ConnectedFollower<T extends StreamTopic> extends Follower<T> {
  constructor(
    private readonly connection: ConnectionHandle,
    ctx: Context,
    check: (principal: Principal, payload: Channels[T]) => void,
  ) {
    super(ctx, check);
  }

  overflow(lastSeq: number): void {
    this.connection.slowConsumer(lastSeq);
  }
}

/**
 * The live stream behind one subscription: replay, per-event checks, seq bookkeeping. It is the
 * pub/sub's stream itself (no generator around it) with one small observer: an idle subscription
 * costs little.
 */
export function follow<T extends StreamTopic>(
  ctx: Context,
  topic: T,
  key: string,
  after: number | null,
  check: (principal: Principal, payload: Channels[T]) => void,
  coalesce = false,
): AsyncIterableIterator<Envelope<T>> {
  const connection = ctx.connection;
  return ctx.services.pubsub.subscribe(topic, key, {
    after,
    coalesce,
    ...(connection
      ? { maxBuffered: connection.maxBufferedEvents, observer: new ConnectedFollower(connection, ctx, check) }
      : { observer: new Follower(ctx, check) }),
  });
}

const sessionCheck = (principal: Principal, payload: { sessionId: string; accountId: string }) =>
  assertCanReadSession(principal, { id: payload.sessionId, accountId: payload.accountId });
const sandboxCheck = (principal: Principal, payload: { sessionId: string; accountId: string }) =>
  canReadSandbox(principal, payload);

/**
 * Overwrites what the event froze (status, phase, stop reason, the sandbox's status and runtime
 * state) on the row read now, so live and replayed events show the session as it was. Events
 * logged before a field was frozen keep the current value.
 */
function asOfEvent<S extends { status: unknown }>(session: S, snapshot: SessionSnapshot): S {
  const frozen = session as S & {
    provisioningPhase?: unknown;
    stopReason?: unknown;
    sandbox?: { status?: unknown; runtimeState?: unknown } | null;
  };
  frozen.status = snapshot.status as never;
  if (snapshot.provisioningPhase !== undefined && 'provisioningPhase' in frozen)
    frozen.provisioningPhase = snapshot.provisioningPhase;
  if (snapshot.stopReason !== undefined && 'stopReason' in frozen) frozen.stopReason = snapshot.stopReason;
  if (snapshot.sandboxStatus === null && 'sandbox' in frozen) frozen.sandbox = null;
  else if (snapshot.sandboxStatus !== undefined && frozen.sandbox) {
    if ('status' in frozen.sandbox) frozen.sandbox.status = snapshot.sandboxStatus;
    if ('runtimeState' in frozen.sandbox) frozen.sandbox.runtimeState = snapshot.runtimeState ?? null;
  }
  return session;
}

export function requireId(value: unknown, type: string, arg: string): string {
  const id = tryParseId(String(value), type);
  if (!id) throw badUserInput(`Not a valid ${type} id.`, [arg]);
  return id;
}

builder.subscriptionField('sessionUpdated', (t) =>
  t.prismaField({
    type: 'Session',
    description: 'Changes of one session; `Session.seq` is the seq of the change.',
    authScopes: { authenticated: true },
    args: { id: t.arg.id(), after: t.arg.int({ required: false, description: AFTER_DESCRIPTION }) },
    subscribe: async (_root, args, ctx) => {
      const id = requireId(args.id, 'Session', 'id');
      const after = parseAfter(args.after);
      const session = await ctx.services.sessions.find(id);
      if (!session) throw badUserInput('No session with that id.', ['id']);
      assertCanReadSession(ctx.principal!, session);
      return follow(ctx, 'sessionUpdated', id, after, sessionCheck);
    },
    resolve: async (query, event: Envelope<'sessionUpdated'>, _args, ctx) => {
      const session = await ctx.services.sessions.get(event.key, query);
      assertCanReadSession(ctx.principal!, session);
      // The state at the time of the event (replayed events show what happened, not what is).
      return Object.assign(asOfEvent(session, event.payload), { seq: event.seq });
    },
  }),
);

builder.subscriptionField('accountSessions', (t) =>
  t.prismaField({
    type: 'Session',
    description:
      "Every session change in the viewer's account. `extensions.seq` numbers the account's stream; `Session.seq` the session's.",
    authScopes: { scope: 'sessions:read' },
    args: { after: t.arg.int({ required: false, description: AFTER_DESCRIPTION }) },
    subscribe: async (_root, args, ctx) => {
      const principal = ctx.principal;
      if (!principal || !can(principal, 'account.watch'))
        throw forbidden('A sandbox token cannot watch the account.');
      return follow(ctx, 'accountSessions', principal.accountId, parseAfter(args.after), sessionCheck);
    },
    resolve: async (query, event: Envelope<'accountSessions'>, _args, ctx) => {
      const session = await ctx.services.sessions.get(event.payload.sessionId, query);
      assertCanReadSession(ctx.principal!, session);
      return Object.assign(asOfEvent(session, event.payload), {
        ...(event.payload.sessionSeq !== undefined ? { seq: event.payload.sessionSeq } : {}),
      });
    },
  }),
);

builder.subscriptionField('sandboxUpdated', (t) =>
  t.prismaField({
    type: 'Sandbox',
    authScopes: { authenticated: true },
    args: { id: t.arg.id(), after: t.arg.int({ required: false, description: AFTER_DESCRIPTION }) },
    subscribe: async (_root, args, ctx) => {
      const id = requireId(args.id, 'Sandbox', 'id');
      const after = parseAfter(args.after);
      const sandbox = await ctx.services.sandboxInfo.find(id);
      if (!sandbox) throw badUserInput('No sandbox with that id.', ['id']);
      canReadSandbox(ctx.principal, sandbox);
      return follow(ctx, 'sandboxUpdated', id, after, sandboxCheck);
    },
    resolve: async (query, event: Envelope<'sandboxUpdated'>, _args, ctx) => {
      const sandbox = await ctx.services.sandboxInfo.get(event.key, query);
      canReadSandbox(ctx.principal, sandbox);
      return Object.assign(sandbox, { status: event.payload.status as never });
    },
  }),
);

builder.subscriptionField('telemetry', (t) =>
  t.prismaField({
    type: 'TelemetrySample',
    description: 'Telemetry of one sandbox. A slow reader gets the newest sample, not a backlog.',
    authScopes: { authenticated: true },
    args: { sandboxId: t.arg.id(), after: t.arg.int({ required: false, description: AFTER_DESCRIPTION }) },
    subscribe: async (_root, args, ctx) => {
      const id = requireId(args.sandboxId, 'Sandbox', 'sandboxId');
      const after = parseAfter(args.after);
      const sandbox = await ctx.services.telemetry.sandboxOwner(id);
      if (!sandbox) throw badUserInput('No sandbox with that id.', ['sandboxId']);
      canReadSandbox(ctx.principal, sandbox);
      return follow(ctx, 'telemetry', id, after, sandboxCheck, true);
    },
    resolve: async (query, event: Envelope<'telemetry'>, _args, ctx) => {
      const { sample, sampleId, sandboxId } = event.payload;
      // Capability was checked against the event; a sample carried in it needs no database read.
      if (sample) {
        return {
          id: BigInt(sampleId),
          sandboxId,
          ...sample,
          at: new Date(sample.at),
        } satisfies Prisma.TelemetrySampleGetPayload<object>;
      }
      return ctx.services.telemetry.sample(BigInt(sampleId), query);
    },
  }),
);

builder.subscriptionField('reloadProgress', (t) =>
  t.prismaField({
    type: 'Reload',
    authScopes: { authenticated: true },
    args: { reloadId: t.arg.id(), after: t.arg.int({ required: false, description: AFTER_DESCRIPTION }) },
    subscribe: async (_root, args, ctx) => {
      const id = requireId(args.reloadId, 'Reload', 'reloadId');
      const after = parseAfter(args.after);
      const reload = await ctx.services.reloads.findWithSession(id);
      if (!reload) throw badUserInput('No reload with that id.', ['reloadId']);
      assertCanReadSession(ctx.principal!, reload.session);
      return follow(ctx, 'reloadProgress', id, after, sessionCheck);
    },
    resolve: async (query, event: Envelope<'reloadProgress'>, _args, ctx) => {
      const reload = await ctx.services.reloads.get(event.key, query);
      assertCanReadSession(ctx.principal!, {
        id: event.payload.sessionId,
        accountId: event.payload.accountId,
      });
      return event.payload.status ? Object.assign(reload, { status: event.payload.status as never }) : reload;
    },
  }),
);
