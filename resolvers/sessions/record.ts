// The session record (R-REC-1): every message and part the agent streams, kept by the control plane
// as the daemon forwards OpenCode's events, so Session.messages, the record download and the
// dashboard read it whether or not the sandbox runs. One statement per forwarded batch; parts are
// stored as the API's MessagePart view (tool output and text cut at maxOutputChars with a marker).
import type { Db, Logger, RawSql } from '../platform';
import type { Principal } from '../auth/principal';
import { authorize } from '../auth/policy';
import { assertCanReadSession, assertHuman, assertScope } from '../auth/authz';
import { ConflictError, NotFoundError } from '../errors';
import { parseId } from '../ids';
import { appendStreamSql } from '../events/event-log';
import { type MessagePartView, type MessageView, partView } from '../gateway/conversation';

type Json = Record<string, unknown>;
const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);
const obj = (value: unknown): Json => (value && typeof value === 'object' ? (value as Json) : {});
const num = (value: unknown): number | null => (typeof value === 'number' ? value : null);

/** Default cut of a recorded tool output or text: 256 KiB characters. */
export const DEFAULT_RECORD_MAX_OUTPUT_CHARS = 256 * 1024;

/** The text kept of `text` when it is over `max` characters, ending with a marker line. */
export function cutWithMarker(text: string, max: number): { text: string; cut: boolean } {
  if (text.length <= max) return { text, cut: false };
  return { text: `${text.slice(0, max)}\n[… ${text.length - max} characters cut]`, cut: true };
}

function errorText(error: unknown): string | null {
  if (!error) return null;
  const e = obj(error);
  return [str(e.name), str(obj(e.data).message)].filter(Boolean).join(': ') || 'error';
}

/** The part as the record keeps it: the API view, uncut by the event limit, with timings. */
export function recordPartView(
  part: Json,
  attachmentUrl: (messageId: string, partId: string) => string,
  maxChars: number,
): MessagePartView {
  const view = partView(
    { ...part, text: undefined, state: { ...obj(part.state), output: undefined } },
    attachmentUrl,
  );
  const state = obj(part.state);
  let truncated = false;
  const text = str(part.text);
  if (text !== null) {
    const kept = cutWithMarker(text, maxChars);
    view.text = kept.text;
    truncated ||= kept.cut;
  }
  if (state.output !== undefined) {
    const output = typeof state.output === 'string' ? state.output : JSON.stringify(state.output);
    const kept = cutWithMarker(output, maxChars);
    view.toolOutput = kept.text;
    truncated ||= kept.cut;
  }
  if (view.toolError !== null) view.toolError = cutWithMarker(view.toolError, maxChars).text;
  if (view.toolInput !== null && view.toolInput.length > maxChars) {
    view.toolInput = cutWithMarker(view.toolInput, maxChars).text;
    truncated = true;
  }
  const time = obj(state.time ?? part.time);
  view.startedAt = num(time.start);
  view.endedAt = num(time.end);
  view.outputTruncated = truncated;
  if (part.type === 'patch') {
    view.files = Array.isArray(part.files)
      ? part.files.filter((f): f is string => typeof f === 'string')
      : [];
    view.patchHash = str(part.hash);
  }
  return view;
}

interface MessageRow {
  messageId: string;
  role: string | null;
  error: string | null;
  createdAt: Date | null;
  completedAt: Date | null;
}

/** One forwarded batch reduced to the writes it makes, in stream order. */
export interface RecordWrites {
  messages: MessageRow[];
  parts: Array<{ partId: string; messageId: string; data: MessagePartView }>;
  /** Text appended to parts this batch did not set. */
  deltas: Array<{ partId: string; delta: string }>;
  removedMessages: string[];
  removedParts: string[];
}

/** Folds a batch of OpenCode events into the rows to write (the last state of each wins). */
export function recordWrites(
  events: readonly Json[],
  attachmentUrl: (messageId: string, partId: string) => string,
  maxChars: number,
): RecordWrites {
  const messages = new Map<string, MessageRow>();
  const parts = new Map<string, { partId: string; messageId: string; data: MessagePartView }>();
  const deltas = new Map<string, string>();
  const removedMessages = new Set<string>();
  const removedParts = new Set<string>();
  const touch = (messageId: string) => {
    if (!messages.has(messageId))
      messages.set(messageId, { messageId, role: null, error: null, createdAt: null, completedAt: null });
  };
  for (const event of events) {
    const props = obj(event.properties);
    switch (event.type) {
      case 'message.updated': {
        const info = obj(props.info);
        const id = str(info.id);
        if (!id) break;
        const time = obj(info.time);
        const created = num(time.created);
        const completed = num(time.completed);
        removedMessages.delete(id);
        messages.set(id, {
          messageId: id,
          role: str(info.role) ?? 'assistant',
          error: errorText(info.error),
          createdAt: created === null ? null : new Date(created),
          completedAt: completed === null ? null : new Date(completed),
        });
        break;
      }
      case 'message.part.updated': {
        const part = obj(props.part);
        const partId = str(part.id);
        const messageId = str(part.messageID);
        if (!partId || !messageId) break;
        touch(messageId);
        removedParts.delete(partId);
        deltas.delete(partId);
        parts.set(partId, { partId, messageId, data: recordPartView(part, attachmentUrl, maxChars) });
        break;
      }
      case 'message.part.delta': {
        if (props.field !== undefined && props.field !== 'text') break;
        const partId = str(props.partID);
        const delta = str(props.delta);
        if (!partId || !delta) break;
        const set = parts.get(partId);
        if (set) {
          const kept = cutWithMarker((set.data.text ?? '') + delta, maxChars);
          set.data.text = kept.text;
          if (kept.cut) set.data.outputTruncated = true;
        } else deltas.set(partId, (deltas.get(partId) ?? '') + delta);
        break;
      }
      case 'message.part.removed': {
        const partId = str(props.partID);
        if (!partId) break;
        parts.delete(partId);
        deltas.delete(partId);
        removedParts.add(partId);
        break;
      }
      case 'message.removed': {
        const id = str(props.messageID);
        if (!id) break;
        messages.delete(id);
        for (const [partId, part] of parts) if (part.messageId === id) parts.delete(partId);
        removedMessages.add(id);
        break;
      }
      default:
        break;
    }
  }
  return {
    messages: [...messages.values()],
    parts: [...parts.values()],
    deltas: [...deltas].map(([partId, delta]) => ({ partId, delta })),
    removedMessages: [...removedMessages],
    removedParts: [...removedParts],
  };
}

// Data-modifying CTEs of one statement see the same snapshot: recordWrites never sends one row to
// two of them (a part set in this batch takes its deltas in JS; removals drop the batch's writes).
const WRITE_CTES = `t AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamp(3)[], $6::timestamp(3)[])
    WITH ORDINALITY AS t("messageId", "role", "error", "createdAt", "completedAt", "ord")
), m AS (
  INSERT INTO "SessionRecordMessage" ("sessionId", "messageId", "role", "error", "createdAt", "completedAt", "updatedAt")
  SELECT $1::uuid, "messageId", "role", "error", "createdAt", "completedAt", CURRENT_TIMESTAMP
  FROM t WHERE "role" IS NOT NULL ORDER BY "ord"
  ON CONFLICT ("sessionId", "messageId") DO UPDATE SET
    "role" = EXCLUDED."role",
    "error" = EXCLUDED."error",
    "createdAt" = coalesce(EXCLUDED."createdAt", "SessionRecordMessage"."createdAt"),
    "completedAt" = coalesce(EXCLUDED."completedAt", "SessionRecordMessage"."completedAt"),
    "updatedAt" = CURRENT_TIMESTAMP
  RETURNING 1
), placeholder AS (
  -- A part whose message.updated has not arrived yet: the message row exists from its first part.
  INSERT INTO "SessionRecordMessage" ("sessionId", "messageId", "role")
  SELECT $1::uuid, "messageId", 'assistant' FROM t WHERE "role" IS NULL ORDER BY "ord"
  ON CONFLICT ("sessionId", "messageId") DO NOTHING
  RETURNING 1
), p AS (
  INSERT INTO "SessionRecordPart" ("sessionId", "partId", "messageId", "data", "updatedAt")
  SELECT $1::uuid, t."partId", t."messageId", t."data", CURRENT_TIMESTAMP
  FROM unnest($7::text[], $8::text[], $9::jsonb[]) WITH ORDINALITY AS t("partId", "messageId", "data", "ord")
  ORDER BY t."ord"
  ON CONFLICT ("sessionId", "partId") DO UPDATE SET "data" = EXCLUDED."data", "updatedAt" = CURRENT_TIMESTAMP
  RETURNING 1
), d AS (
  UPDATE "SessionRecordPart" r SET
    "data" = jsonb_set(r."data", '{text}', to_jsonb(left(coalesce(r."data"->>'text', '') || t."delta", $12::int))),
    "updatedAt" = CURRENT_TIMESTAMP
  FROM unnest($10::text[], $11::text[]) AS t("partId", "delta")
  WHERE r."sessionId" = $1::uuid AND r."partId" = t."partId"
  RETURNING 1
), rm AS (
  DELETE FROM "SessionRecordMessage" WHERE "sessionId" = $1::uuid AND "messageId" = ANY($13::text[]) RETURNING 1
), rp AS (
  DELETE FROM "SessionRecordPart" WHERE "sessionId" = $1::uuid
    AND ("partId" = ANY($14::text[]) OR "messageId" = ANY($13::text[])) RETURNING 1
)`;

const WRITE = `WITH ${WRITE_CTES}
SELECT (SELECT count(*) FROM m)::int + (SELECT count(*) FROM p)::int AS "n"`;

/**
 * The record's write and the batch's sessionEvents, appended to the event log, in one statement: an
 * event in the log is always in the record (a replay the log no longer serves is served from the
 * record), and a report costs one round trip to the database, not two. $15: the events' payloads
 * as one JSON array. As a jsonb[] each payload was escaped again into an array literal (every quote
 * of the JSON), which took longer than the JSON encoding itself.
 */
const WRITE_AND_LOG = appendStreamSql(
  `${WRITE_CTES}, input AS (
  SELECT e."payload", e."ord"::int AS "ord" FROM jsonb_array_elements($15::jsonb) WITH ORDINALITY AS e("payload", "ord")
)`,
  'sessionEvents',
  '$1::uuid::text',
);

function emptyWrites(w: RecordWrites): boolean {
  return (
    w.messages.length +
      w.parts.length +
      w.deltas.length +
      w.removedMessages.length +
      w.removedParts.length ===
    0
  );
}

/** $1 … $14 of WRITE_CTES. */
function writeParams(sessionId: string, w: RecordWrites, maxChars: number): unknown[] {
  return [
    sessionId,
    w.messages.map((m) => m.messageId),
    w.messages.map((m) => m.role),
    w.messages.map((m) => m.error),
    w.messages.map((m) => m.createdAt?.toISOString() ?? null),
    w.messages.map((m) => m.completedAt?.toISOString() ?? null),
    w.parts.map((p) => p.partId),
    w.parts.map((p) => p.messageId),
    w.parts.map((p) => JSON.stringify(p.data)),
    w.deltas.map((d) => d.partId),
    w.deltas.map((d) => d.delta),
    maxChars,
    w.removedMessages,
    w.removedParts,
  ];
}

export interface SessionRecordOptions {
  db: Db;
  sql: RawSql;
  logger: Logger;
  /** Characters kept of one tool output or text part. @default DEFAULT_RECORD_MAX_OUTPUT_CHARS */
  maxOutputChars?: number;
  /** Records of sessions that ended longer ago than this are deleted (0: kept). @default 0 */
  retentionMs?: number;
  /** SINGULACOMP API base URL clients use (download and attachment URLs). */
  apiUrl: () => string;
  now?: () => number;
}

export type SessionRecord = ReturnType<typeof createSessionRecord>;

export function createSessionRecord(options: SessionRecordOptions) {
  const { db, sql } = options;
  const log = options.logger.child({ module: 'session-record' });
  const maxChars = options.maxOutputChars ?? DEFAULT_RECORD_MAX_OUTPUT_CHARS;
  const now = options.now ?? Date.now;
  const base = () => options.apiUrl().replace(/\/+$/, '');

  async function messages(sessionId: string): Promise<MessageView[]> {
    const [rows, parts] = await Promise.all([
      db.sessionRecordMessage.findMany({ where: { sessionId }, orderBy: { ord: 'asc' } }),
      db.sessionRecordPart.findMany({
        where: { sessionId },
        orderBy: { ord: 'asc' },
        select: { messageId: true, data: true },
      }),
    ]);
    const byMessage = new Map<string, MessagePartView[]>();
    for (const part of parts) {
      const list = byMessage.get(part.messageId) ?? [];
      list.push(part.data as unknown as MessagePartView);
      byMessage.set(part.messageId, list);
    }
    return rows.map((row) => {
      const list = byMessage.get(row.messageId) ?? [];
      return {
        id: row.messageId,
        role: row.role,
        text: list
          .filter((p) => p.type === 'text' && p.text)
          .map((p) => p.text)
          .join(''),
        createdAt: row.createdAt,
        completedAt: row.completedAt,
        error: row.error,
        parts: list,
      };
    });
  }

  return {
    maxOutputChars: maxChars,

    /** Writes one forwarded batch of OpenCode events (raw JSON) into the session's record. */
    async ingest(
      sessionId: string,
      events: readonly Json[],
      attachmentUrl: (messageId: string, partId: string) => string,
    ): Promise<void> {
      const w = recordWrites(events, attachmentUrl, maxChars);
      if (emptyWrites(w)) return;
      await sql.query(WRITE, writeParams(sessionId, w, maxChars), { prepared: 'session-record-write' });
    },

    /**
     * ingest, and the events `logged` appended to the session's sessionEvents stream in the same
     * statement (in this order); returns their seqs. Broadcast them once this resolved.
     */
    async ingestAndLog(
      sessionId: string,
      events: readonly Json[],
      attachmentUrl: (messageId: string, partId: string) => string,
      logged: readonly unknown[],
    ): Promise<number[]> {
      const w = recordWrites(events, attachmentUrl, maxChars);
      if (logged.length === 0 && emptyWrites(w)) return [];
      const [span] = await sql.query<{ first: number; n: number }>(
        WRITE_AND_LOG,
        [...writeParams(sessionId, w, maxChars), JSON.stringify(logged)],
        { prepared: 'session-record-write-and-log' },
      );
      // One stream: the batch took consecutive seqs in its order (one row, not one per event).
      const n = span ? Number(span.n) : 0;
      if (n !== logged.length)
        throw new Error(`sessionEvents append took ${n} seqs for ${logged.length} events`);
      const first = Number(span?.first);
      return Array.from({ length: n }, (_, i) => first + i);
    },

    /** Session.messages: the record, oldest first. */
    async messages(principal: Principal, session: { id: string; accountId: string }): Promise<MessageView[]> {
      assertCanReadSession(principal, session);
      return messages(session.id);
    },

    documentUrl(sessionId: string): string {
      return `${base()}/v1/sessions/${sessionId}/record`;
    },

    /** The whole record as one JSON document (the download). */
    async document(principal: Principal, rawSessionId: string) {
      const sessionId = parseId(rawSessionId, 'Session', ['sessionId']);
      const session = await db.session.findUnique({
        where: { id: sessionId },
        include: { project: { select: { id: true, name: true } } },
      });
      if (!session) throw new NotFoundError('No session with that id.', ['sessionId']);
      assertCanReadSession(principal, session);
      return {
        format: 'singulacomp.session-record/1',
        exportedAt: new Date(now()).toISOString(),
        maxOutputChars: maxChars,
        session: {
          id: session.id,
          project: session.project,
          branchName: session.branchName,
          baseRef: session.baseRef,
          baseCommit: session.baseCommit,
          agent: session.agent,
          status: session.status,
          stopReason: session.stopReason,
          failureReason: session.failureReason,
          createdAt: session.createdAt,
          startedAt: session.startedAt,
          stoppedAt: session.stoppedAt,
        },
        messages: await messages(session.id),
      };
    },

    /**
     * deleteSession: the record of an ended session goes (messages, parts, the kept log tail and
     * ports, telemetry samples); the creator or an account admin may. The session row stays, as do its
     * sandbox's running intervals (usage and billing), its change requests and its git branch.
     */
    async deleteSession(principal: Principal, input: { sessionId: string }) {
      assertHuman(principal);
      assertScope(principal, 'sessions:write');
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
      if (!session || session.accountId !== principal.accountId)
        throw new NotFoundError('No session with that id.', ['input', 'sessionId']);
      authorize(principal, 'session.delete', { userId: session.userId });
      if (session.status !== 'STOPPED' && session.status !== 'FAILED') {
        throw new ConflictError(`Stop the session first (it is ${session.status}).`, ['input', 'sessionId']);
      }
      const sandboxId = session.sandbox?.id ?? null;
      await db.$transaction([
        db.sessionRecordPart.deleteMany({ where: { sessionId } }),
        db.sessionRecordMessage.deleteMany({ where: { sessionId } }),
        ...(sandboxId
          ? [
              db.sandboxReport.deleteMany({ where: { sandboxId } }),
              db.telemetrySample.deleteMany({ where: { sandboxId } }),
            ]
          : []),
        db.session.update({ where: { id: sessionId }, data: { prompt: null } }),
      ]);
      log.info({ sessionId, accountId: session.accountId }, 'session record deleted');
      return { deletedSessionId: sessionId };
    },

    /** Deletes the records of sessions that ended longer than retentionMs ago; returns how many parts. */
    async prune(): Promise<number> {
      const retentionMs = options.retentionMs ?? 0;
      if (retentionMs <= 0) return 0;
      const cutoff = new Date(now() - retentionMs);
      const rows = await sql.query<{ n: number }>(
        `WITH ended AS (
           SELECT "id" FROM "Session" WHERE "status" IN ('STOPPED', 'FAILED') AND "stoppedAt" < $1::timestamp
         ), p AS (
           DELETE FROM "SessionRecordPart" WHERE "sessionId" IN (SELECT "id" FROM ended) RETURNING 1
         ), m AS (
           DELETE FROM "SessionRecordMessage" WHERE "sessionId" IN (SELECT "id" FROM ended) RETURNING 1
         )
         SELECT (SELECT count(*) FROM p)::int + (SELECT count(*) FROM m)::int AS "n"`,
        [cutoff],
      );
      const n = Number(rows[0]?.n ?? 0);
      if (n > 0) log.info({ rows: n, retentionMs }, 'session records past retention deleted');
      return n;
    },
  };
}
