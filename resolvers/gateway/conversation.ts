// The conversation over GraphQL (R-CONV-1): sendMessage and abortTurn reach OpenCode through the
// daemon, Session.messages reads its transcript, and the events the daemon forwards become the
// sessionEvents stream (through the event log, so seq/resume work like every other stream).
import type { Db } from '../platform';
import type { Logger, RawSql } from '../platform';
import type { AgentEventPayload, Channels, PubSub } from '../events/channels';
import { assertCanWriteSession } from '../auth/authz';
import type { Principal } from '../auth/principal';
import { assertDaemon } from '../auth/policy';
import { type DaemonClient, DaemonUnavailableError, contextUserId } from '../daemon/daemon-client';
import { ConflictError, DomainError, NotFoundError, ValidationError, forbidden } from '../errors';
import { parseId } from '../ids';

/** Thrown when the session's agent cannot take the request now (daemon unreachable, OpenCode down). */
export class AgentUnavailableError extends DomainError {
  override readonly code: string = 'AGENT_UNAVAILABLE';
}

export const MAX_MESSAGE_CHARS = 100_000;
export const MAX_EVENTS_PER_BATCH = 500;
const MAX_EVENT_CHARS = 256 * 1024;
/** Text carried in one event or part; longer text is cut (the transcript keeps the whole). */
const MAX_PART_TEXT = 64 * 1024;

export interface MessagePartView {
  id: string;
  type: string;
  text: string | null;
  tool: string | null;
  toolCallId: string | null;
  toolStatus: string | null;
  toolInput: string | null;
  toolOutput: string | null;
  toolError: string | null;
  title: string | null;
  url: string | null;
  mime: string | null;
  filename: string | null;
  /** Epoch ms (OpenCode's part or tool state time). */
  startedAt?: number | null;
  endedAt?: number | null;
  /** toolOutput or text was cut with a marker. */
  outputTruncated?: boolean;
  /** patch parts. */
  files?: string[] | null;
  patchHash?: string | null;
}

export interface MessageView {
  id: string;
  role: string;
  text: string;
  createdAt: Date | null;
  completedAt?: Date | null;
  error: string | null;
  parts: MessagePartView[];
}

type Json = Record<string, unknown>;
const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);
const obj = (value: unknown): Json => (value && typeof value === 'object' ? (value as Json) : {});
const cut = (text: string | null): string | null =>
  text !== null && text.length > MAX_PART_TEXT ? text.slice(0, MAX_PART_TEXT) : text;

function errorText(error: unknown): string | null {
  if (!error) return null;
  const e = obj(error);
  return [str(e.name), str(obj(e.data).message)].filter(Boolean).join(': ') || 'error';
}

/** One OpenCode part as the API shows it; file URLs point at the API, never at data: blobs. */
export function partView(
  part: Json,
  attachmentUrl: (messageId: string, partId: string) => string,
): MessagePartView {
  const state = obj(part.state);
  const id = str(part.id) ?? '';
  const isFile = part.type === 'file';
  const output =
    state.output === undefined
      ? null
      : typeof state.output === 'string'
        ? state.output
        : JSON.stringify(state.output);
  return {
    id,
    type: str(part.type) ?? 'unknown',
    text: cut(str(part.text)),
    tool: str(part.tool),
    toolCallId: str(part.callID),
    toolStatus: str(state.status),
    toolInput: state.input === undefined ? null : JSON.stringify(state.input),
    toolOutput: cut(output),
    toolError: str(state.error),
    title: str(state.title),
    url: isFile ? attachmentUrl(str(part.messageID) ?? '', id) : null,
    mime: str(part.mime),
    filename: str(part.filename),
  };
}

/** Maps one forwarded OpenCode event, or null when a conversation client has no use for it. */
export function agentEventFrom(
  event: Json,
  attachmentUrl: (messageId: string, partId: string) => string,
): AgentEventPayload | null {
  const props = obj(event.properties);
  switch (event.type) {
    case 'message.part.delta': {
      if (props.field !== undefined && props.field !== 'text') return null;
      return {
        kind: 'TEXT_DELTA',
        opencodeSessionId: str(props.sessionID),
        messageId: str(props.messageID) ?? '',
        partId: str(props.partID) ?? '',
        delta: cut(str(props.delta)) ?? '',
      };
    }
    case 'message.part.updated': {
      const part = obj(props.part);
      const view = partView(part, attachmentUrl);
      return {
        kind: view.type === 'tool' ? 'TOOL_CALL' : 'PART_UPDATED',
        opencodeSessionId: str(part.sessionID),
        messageId: str(part.messageID) ?? '',
        partId: view.id,
        part: view as unknown as Json,
      };
    }
    case 'message.updated': {
      const info = obj(props.info);
      const error = errorText(info.error);
      return {
        kind: 'MESSAGE_UPDATED',
        opencodeSessionId: str(info.sessionID),
        messageId: str(info.id) ?? '',
        role: str(info.role) ?? 'assistant',
        ...(error ? { error } : {}),
      };
    }
    case 'session.status': {
      const type = str(obj(props.status).type);
      const turnState =
        type === 'busy' ? 'BUSY' : type === 'retry' ? 'RETRY' : type === 'idle' ? 'IDLE' : null;
      if (!turnState) return null;
      const message = str(obj(props.status).message);
      return {
        kind: 'TURN_STATE',
        opencodeSessionId: str(props.sessionID),
        turnState,
        ...(turnState === 'RETRY' && message ? { error: message } : {}),
      };
    }
    case 'session.idle':
      return { kind: 'TURN_STATE', opencodeSessionId: str(props.sessionID), turnState: 'IDLE' };
    case 'session.error':
      return {
        kind: 'TURN_STATE',
        opencodeSessionId: str(props.sessionID),
        turnState: 'ERROR',
        error: errorText(props.error) ?? 'OpenCode session error',
      };
    default:
      return null;
  }
}

export interface ConversationServiceOptions {
  db: Db;
  pubsub: PubSub;
  daemon: DaemonClient;
  logger: Logger;
  /** SINGULACOMP API base URL clients use (attachment URLs). */
  apiUrl: () => string;
  sql: RawSql;
  /** Where the forwarded events are kept (Session.messages reads it): resolvers/sessions/record.ts. */
  record: ConversationRecord;
}

export interface ConversationRecord {
  ingest(
    sessionId: string,
    events: readonly Json[],
    attachmentUrl: (messageId: string, partId: string) => string,
  ): Promise<void>;
  /** ingest, with `logged` appended to the session's sessionEvents in the same statement; their seqs. */
  ingestAndLog(
    sessionId: string,
    events: readonly Json[],
    attachmentUrl: (messageId: string, partId: string) => string,
    logged: readonly Channels['sessionEvents'][],
  ): Promise<number[]>;
  messages(principal: Principal, session: { id: string; accountId: string }): Promise<MessageView[]>;
}

export type ConversationService = ReturnType<typeof createConversationService>;

export function createConversationService(options: ConversationServiceOptions) {
  const { db, pubsub, daemon } = options;
  const log = options.logger.child({ module: 'conversation' });

  const attachmentUrlFor = (sessionId: string) => (messageId: string, partId: string) =>
    `${options.apiUrl().replace(/\/+$/, '')}/v1/sessions/${sessionId}/attachments/${encodeURIComponent(messageId)}/${encodeURIComponent(partId)}`;

  async function runningSession(sessionId: string, field: string[]) {
    const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
    if (!session) throw new NotFoundError('No session with that id.', field);
    return session;
  }

  function target(session: Awaited<ReturnType<typeof runningSession>>) {
    const sandbox = session.sandbox;
    if (session.status !== 'RUNNING' || !sandbox?.serviceUrl || !sandbox.sandboxTokenEnc) {
      throw new ConflictError(
        `The session's agent runs only while the session is RUNNING (this one is ${session.status}).`,
        ['input', 'sessionId'],
      );
    }
    return {
      sessionId: session.id,
      serviceUrl: sandbox.serviceUrl,
      sandboxTokenEnc: sandbox.sandboxTokenEnc,
      serviceHeadersEnc: sandbox.serviceHeadersEnc,
    };
  }

  /** Calls a daemon control route; expected failures become AgentUnavailableError. */
  async function call(
    principal: Principal,
    session: Awaited<ReturnType<typeof runningSession>>,
    path: string,
    init: { method?: string; body?: unknown },
    ok: number,
  ): Promise<Json> {
    let response: Response;
    try {
      response = await daemon.request(target(session), contextUserId(principal), path, init);
    } catch (error) {
      if (error instanceof DaemonUnavailableError)
        throw new AgentUnavailableError(error.message, ['input', 'sessionId']);
      throw error;
    }
    const text = await response.text().catch(() => '');
    if (response.status !== ok) {
      log.warn(
        { sessionId: session.id, path, status: response.status, body: text.slice(0, 500) },
        'daemon refused',
      );
      throw new AgentUnavailableError(
        `The session's agent refused (HTTP ${response.status}): ${text.slice(0, 300)}`,
        ['input', 'sessionId'],
      );
    }
    try {
      return obj(JSON.parse(text));
    } catch {
      return {};
    }
  }

  return {
    attachmentUrlFor,

    /** sendMessage: delivers a user message to the session's agent; starts a turn. */
    async send(principal: Principal, input: { sessionId: string; text: string }) {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const text = input.text.replaceAll('\0', '');
      if (text.trim().length === 0 || text.length > MAX_MESSAGE_CHARS) {
        throw new ValidationError(`text must be 1 to ${MAX_MESSAGE_CHARS} characters.`, ['input', 'text']);
      }
      const session = await runningSession(sessionId, ['input', 'sessionId']);
      assertCanWriteSession(principal, session);
      await call(principal, session, '/singulacomp/message', { method: 'POST', body: { text } }, 202);
      return session;
    },

    /** abortTurn: ends the running turn; `aborted` says whether one was running. */
    async abort(principal: Principal, input: { sessionId: string }) {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const session = await runningSession(sessionId, ['input', 'sessionId']);
      assertCanWriteSession(principal, session);
      const body = await call(principal, session, '/singulacomp/abort', { method: 'POST' }, 200);
      return { session, aborted: body.aborted === true };
    },

    /** Session.messages: the session's record, oldest first (also once the sandbox is gone). */
    messages(principal: Principal, session: { id: string; accountId: string }): Promise<MessageView[]> {
      return options.record.messages(principal, session);
    },

    /**
     * sessionEvents with `after` whose next event the log no longer keeps (pruned after an hour):
     * the record as events (each message, then each part with its whole state), stamped with the
     * stream's current seq, to be followed live from that seq. null: the log can replay it.
     */
    async replayFromRecord(
      principal: Principal,
      session: { id: string; accountId: string },
      after: number,
    ): Promise<{ seq: number; events: AgentEventPayload[] } | null> {
      const seq = await pubsub.currentSeq('sessionEvents', session.id);
      if (seq <= after) return null;
      const kept = await options.sql.query<{ n: number }>(
        `SELECT count(*)::int AS "n" FROM "RealtimeEvent" WHERE "topic" = 'sessionEvents' AND "key" = $1 AND "seq" = $2`,
        [session.id, after + 1],
      );
      if (Number(kept[0]?.n ?? 0) > 0) return null;
      const events: AgentEventPayload[] = [];
      for (const message of await options.record.messages(principal, session)) {
        events.push({
          kind: 'MESSAGE_UPDATED',
          opencodeSessionId: null,
          messageId: message.id,
          role: message.role,
          ...(message.error ? { error: message.error } : {}),
        });
        for (const part of message.parts) {
          events.push({
            kind: part.type === 'tool' ? 'TOOL_CALL' : 'PART_UPDATED',
            opencodeSessionId: null,
            messageId: message.id,
            partId: part.id,
            part: part as unknown as Json,
          });
        }
      }
      return { seq, events };
    },

    /** reportAgentEvents: the sandbox token of the session forwards OpenCode's events, in order. */
    async report(principal: Principal | null, input: { sessionId: string; events: readonly string[] }) {
      assertDaemon(principal, 'Only the sandbox token can report agent events.');
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      if (sessionId !== principal.sessionId) {
        throw forbidden('A sandbox token can only report events of its own session.');
      }
      if (input.events.length > MAX_EVENTS_PER_BATCH) {
        throw new ValidationError(`At most ${MAX_EVENTS_PER_BATCH} events per call.`, ['input', 'events']);
      }
      const url = attachmentUrlFor(sessionId);
      const mapped: AgentEventPayload[] = [];
      const raw: Json[] = [];
      input.events.forEach((text, index) => {
        if (text.length > MAX_EVENT_CHARS) {
          throw new ValidationError(`Event ${index} is over ${MAX_EVENT_CHARS} characters.`, [
            'input',
            'events',
          ]);
        }
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw new ValidationError(`Event ${index} is not JSON.`, ['input', 'events']);
        }
        raw.push(obj(json));
        const event = agentEventFrom(obj(json), url);
        if (event) mapped.push(event);
      });
      // The record and the event log in one statement: an event in the log is always in the record
      // too, so a replay the log can no longer serve is served from the record (replayFromRecord).
      // The cursor row orders appends, so seqs follow OpenCode's order; the daemon sends its next
      // batch only after this answer.
      const logged = mapped.map((event) => ({ sessionId, accountId: principal.accountId, event }));
      const seqs = await options.record.ingestAndLog(sessionId, raw, url, logged);
      await pubsub.broadcastMany(
        logged.map((payload, i) => ({ topic: 'sessionEvents', key: sessionId, seq: seqs[i]!, payload })),
      );
      return { accepted: mapped.length };
    },
  };
}
