// The conversation (R-CONV-1): sendMessage, abortTurn, Session.messages, the sessionEvents
// subscription, and reportAgentEvents (the daemon's forwarding channel). Rules live in
// resolvers/gateway/conversation.ts.
import { resolveArrayConnection } from '@pothos/plugin-relay';
import {
  AgentUnavailableError,
  type MessagePartView,
  type MessageView,
} from '../resolvers/gateway/conversation';
import { assertCanReadSession } from '../resolvers/auth/authz';
import { badUserInput } from '../resolvers/errors';
import type { Principal } from '../resolvers/auth/principal';
import type { AgentEventPayload, Envelope } from '../resolvers/events/channels';
import { builder } from './builder';
import { COMMON_ERRORS, ErrorInterface } from './errors';
import { SessionRef } from './sessions';
import { follow, parseAfter, requireId } from './subscriptions';

builder.objectType(AgentUnavailableError, {
  name: 'AgentUnavailableError',
  description:
    "The session's agent cannot take the request now (daemon unreachable or OpenCode down); retry.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof AgentUnavailableError,
  fields: () => ({}),
});

const CONVERSATION_ERRORS = [...COMMON_ERRORS, AgentUnavailableError];

const MessagePart = builder.objectRef<MessagePartView>('MessagePart').implement({
  description: 'One part of a message: text, reasoning, a tool call with its state, or a file.',
  fields: (t) => ({
    id: t.exposeString('id'),
    type: t.exposeString('type', {
      description: 'OpenCode part type: text, reasoning, tool, file, step-start, …',
    }),
    text: t.exposeString('text', { nullable: true }),
    tool: t.exposeString('tool', { nullable: true }),
    toolCallId: t.exposeString('toolCallId', { nullable: true }),
    toolStatus: t.exposeString('toolStatus', {
      nullable: true,
      description: 'pending, running, completed or error.',
    }),
    toolInput: t.exposeString('toolInput', { nullable: true, description: 'The tool input as JSON.' }),
    toolOutput: t.exposeString('toolOutput', {
      nullable: true,
      description:
        'Cut at 64 KiB in events and at the record limit (SINGULACOMP_RECORD_MAX_OUTPUT_BYTES) in the record, ending with a line "[… N characters cut]" (outputTruncated).',
    }),
    outputTruncated: t.boolean({
      description: 'toolOutput or text was cut; the marker line says how much.',
      resolve: (p) => p.outputTruncated ?? false,
    }),
    toolError: t.exposeString('toolError', { nullable: true }),
    title: t.exposeString('title', { nullable: true }),
    url: t.exposeString('url', {
      nullable: true,
      description: 'Attachments: a URL on this API serving the bytes (Authorization as for GraphQL).',
    }),
    mime: t.exposeString('mime', { nullable: true }),
    filename: t.exposeString('filename', { nullable: true }),
    startedAt: t.field({
      type: 'DateTime',
      nullable: true,
      description: 'Tool calls: when the tool started running; text and reasoning: when the part began.',
      resolve: (p) => (p.startedAt == null ? null : new Date(p.startedAt)),
    }),
    endedAt: t.field({
      type: 'DateTime',
      nullable: true,
      resolve: (p) => (p.endedAt == null ? null : new Date(p.endedAt)),
    }),
    durationMs: t.int({
      nullable: true,
      resolve: (p) => (p.startedAt != null && p.endedAt != null ? p.endedAt - p.startedAt : null),
    }),
    files: t.stringList({
      nullable: true,
      description: 'patch parts: the files the step changed (see Session.changes for the diff).',
      resolve: (p) => p.files ?? null,
    }),
    patchHash: t.string({
      nullable: true,
      description: 'patch parts: the snapshot hash OpenCode took before the step.',
      resolve: (p) => p.patchHash ?? null,
    }),
  }),
});

const AgentMessage = builder.objectRef<MessageView>('AgentMessage').implement({
  fields: (t) => ({
    id: t.exposeString('id'),
    role: t.exposeString('role', { description: 'user or assistant.' }),
    text: t.exposeString('text', { description: 'The text parts joined.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime', nullable: true }),
    completedAt: t.field({
      type: 'DateTime',
      nullable: true,
      resolve: (m) => m.completedAt ?? null,
    }),
    error: t.exposeString('error', { nullable: true }),
    parts: t.field({ type: [MessagePart], resolve: (m) => m.parts }),
  }),
});

builder.prismaObjectField('Session', 'messages', (t) =>
  t.connection(
    {
      type: AgentMessage,
      description:
        "The session's record, oldest first: every message and part the agent streamed, kept by the control plane (also after the session stopped, failed or was reaped).",
      resolve: async (session, args, ctx) => {
        const first = Math.min(args.first ?? 20, 100);
        if (first < 0) throw badUserInput('first must be 0 or more.', ['first']);
        const messages = await ctx.services.conversation.messages(ctx.principal!, session);
        return resolveArrayConnection({ args: { ...args, first } }, messages);
      },
    },
    { name: 'AgentMessageConnection' },
    { name: 'AgentMessageEdge' },
  ),
);

// --- sendMessage / abortTurn ----------------------------------------------------------------------

const SendMessageInput = builder.inputType('SendMessageInput', {
  fields: (t) => ({
    sessionId: t.id({ description: 'Global id or UUID.' }),
    text: t.string(),
  }),
});

builder.mutationField('sendMessage', (t) =>
  t.field({
    type: builder.objectRef<{ session: unknown }>('SendMessageSuccess').implement({
      fields: (f) => ({ session: f.field({ type: SessionRef, resolve: (p) => p.session as never }) }),
    }),
    description:
      "Delivers a user message to the session's agent and starts a turn; follow it on sessionEvents.",
    authScopes: { scope: 'sessions:write' },
    errors: { types: CONVERSATION_ERRORS },
    args: { input: t.arg({ type: SendMessageInput }) },
    resolve: async (_root, { input }, ctx) => ({
      session: await ctx.services.conversation.send(ctx.principal!, {
        sessionId: String(input.sessionId),
        text: input.text,
      }),
    }),
  }),
);

const AbortTurnInput = builder.inputType('AbortTurnInput', {
  fields: (t) => ({ sessionId: t.id({ description: 'Global id or UUID.' }) }),
});

builder.mutationField('abortTurn', (t) =>
  t.field({
    type: builder.objectRef<{ session: unknown; aborted: boolean }>('AbortTurnSuccess').implement({
      fields: (f) => ({
        session: f.field({ type: SessionRef, resolve: (p) => p.session as never }),
        aborted: f.exposeBoolean('aborted', { description: 'Whether a turn was running.' }),
      }),
    }),
    authScopes: { scope: 'sessions:write' },
    errors: { types: CONVERSATION_ERRORS },
    args: { input: t.arg({ type: AbortTurnInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.conversation.abort(ctx.principal!, { sessionId: String(input.sessionId) }),
  }),
);

// --- reportAgentEvents (sandbox token) ------------------------------------------------------------

const ReportAgentEventsInput = builder.inputType('ReportAgentEventsInput', {
  fields: (t) => ({
    sessionId: t.id(),
    events: t.stringList({ description: 'OpenCode events, each JSON-encoded, in the order they occurred.' }),
  }),
});

builder.mutationField('reportAgentEvents', (t) =>
  t.field({
    type: builder.objectRef<{ accepted: number }>('ReportAgentEventsSuccess').implement({
      fields: (f) => ({
        accepted: f.exposeInt('accepted', { description: 'Events that became sessionEvents.' }),
      }),
    }),
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReportAgentEventsInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.conversation.report(ctx.principal, {
        sessionId: String(input.sessionId),
        events: input.events,
      }),
  }),
);

/** `first`, then everything `rest` yields; ending early ends `rest` too. */
async function* prepend<T>(first: readonly T[], rest: AsyncIterableIterator<T>): AsyncGenerator<T> {
  try {
    for (const item of first) yield item;
    yield* rest;
  } finally {
    await rest.return?.();
  }
}

// --- sessionEvents --------------------------------------------------------------------------------

const AgentEventKindEnum = builder.enumType('AgentEventKind', {
  values: ['TEXT_DELTA', 'PART_UPDATED', 'TOOL_CALL', 'MESSAGE_UPDATED', 'TURN_STATE'] as const,
});
const TurnStateEnum = builder.enumType('TurnState', { values: ['BUSY', 'RETRY', 'IDLE', 'ERROR'] as const });

const AgentEvent = builder.objectRef<AgentEventPayload & { seq: number }>('AgentEvent').implement({
  description: "One event of the session's agent; `seq` is the value to resume from (`after`).",
  fields: (t) => ({
    seq: t.exposeInt('seq'),
    kind: t.field({ type: AgentEventKindEnum, resolve: (e) => e.kind }),
    opencodeSessionId: t.exposeString('opencodeSessionId', { nullable: true }),
    messageId: t.exposeString('messageId', { nullable: true }),
    partId: t.exposeString('partId', { nullable: true }),
    delta: t.exposeString('delta', {
      nullable: true,
      description: 'TEXT_DELTA: the text appended to the part.',
    }),
    role: t.exposeString('role', { nullable: true }),
    part: t.field({
      type: MessagePart,
      nullable: true,
      resolve: (e) => (e.part as unknown as MessagePartView | undefined) ?? null,
    }),
    turnState: t.field({ type: TurnStateEnum, nullable: true, resolve: (e) => e.turnState ?? null }),
    error: t.exposeString('error', { nullable: true }),
  }),
});

builder.subscriptionField('sessionEvents', (t) =>
  t.field({
    type: AgentEvent,
    description: "The session's agent events: text deltas in order, tool-call updates, turn state.",
    authScopes: { authenticated: true },
    args: {
      sessionId: t.arg.id(),
      after: t.arg.int({
        required: false,
        description:
          "Replay the events with a greater seq first. When the event log no longer keeps them (it keeps an hour), the session's record is replayed instead: each message, then each part with its whole state, all carrying the stream's current seq.",
      }),
    },
    subscribe: async (_root, args, ctx) => {
      const id = requireId(args.sessionId, 'Session', 'sessionId');
      const after = parseAfter(args.after);
      const session = await ctx.services.sessions.find(id);
      if (!session) throw badUserInput('No session with that id.', ['sessionId']);
      assertCanReadSession(ctx.principal!, session);
      const check = (principal: Principal, payload: { sessionId: string; accountId: string }) =>
        assertCanReadSession(principal, { id: payload.sessionId, accountId: payload.accountId });
      // A resume the event log no longer keeps starts from the record instead of failing.
      const fromRecord =
        after === null
          ? null
          : await ctx.services.conversation.replayFromRecord(ctx.principal!, session, after);
      if (!fromRecord) return follow(ctx, 'sessionEvents', id, after, check);
      const envelopes = fromRecord.events.map(
        (event): Envelope<'sessionEvents'> => ({
          topic: 'sessionEvents',
          key: id,
          seq: fromRecord.seq,
          payload: { sessionId: id, accountId: session.accountId, event },
        }),
      );
      return prepend(envelopes, follow(ctx, 'sessionEvents', id, fromRecord.seq, check));
    },
    resolve: (event: Envelope<'sessionEvents'>) => ({ ...event.payload.event, seq: event.seq }),
  }),
);
