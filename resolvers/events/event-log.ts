// The realtime event log in the database: assigns each (topic, key) a gap-free monotonic seq and
// keeps recent events for replay. Counter and event row are written in one statement (or in the
// caller's transaction), so seq k is committed before seq k + 1 can be assigned: a reader that
// sees k + 1 can always read k.
import { createKeyedBatcher } from '../batch';
import type { Database, SqlClient } from '../platform';
import type { Channels, Envelope, StreamTopic } from './channels';

/** A Prisma client or interactive transaction. */
export type { SqlClient };

export interface EventLog {
  append<T extends StreamTopic>(topic: T, key: string, payload: Channels[T], tx?: SqlClient): Promise<number>;
  /** Events of one stream appended together (grouped with other appends), in order; their seqs. */
  appendMany<T extends StreamTopic>(
    topic: T,
    key: string,
    payloads: readonly Channels[T][],
  ): Promise<number[]>;
  /**
   * A session's event and its twin on the account's list, appended together (and grouped with other
   * appends): the twin's payload gets `sessionSeq`, the session event's seq. Returns both seqs.
   */
  appendSession(payload: Channels['sessionUpdated']): Promise<{ seq: number; accountSeq: number }>;
  /** Events with after < seq < before (before null: no upper bound), oldest first. */
  range(
    topic: StreamTopic,
    key: string,
    after: number,
    before: number | null,
    limit: number,
  ): Promise<Envelope[]>;
  currentSeq(topic: StreamTopic, key: string): Promise<number>;
  /** Deletes events older than retentionMs; returns how many. */
  prune(retentionMs: number): Promise<number>;
}

const APPEND = (topic: StreamTopic) => `
WITH c AS (
  INSERT INTO "RealtimeCursor" ("topic", "key", "seq") VALUES ($1::text, $2::text, 1)
  ON CONFLICT ("topic", "key") DO UPDATE SET "seq" = "RealtimeCursor"."seq" + 1
  RETURNING "seq"
), e AS (
  INSERT INTO "RealtimeEvent" ("topic", "key", "seq", "payload")
  SELECT $1::text, $2::text, c."seq", $3::jsonb FROM c
  RETURNING "seq"
)${
  // Session.seq mirrors the session's own stream, so a mutation returning the session reports it.
  topic === 'sessionUpdated'
    ? `, s AS (UPDATE "Session" SET "seq" = c."seq" FROM c WHERE "Session"."id" = $2::uuid RETURNING 1)`
    : ''
}
SELECT "seq" FROM e`;

/**
 * Many events in one statement: per key, the cursor advances by its count and the events take the
 * seqs below the new value in arrival order. Keys are locked in sorted order (no deadlock).
 *
 * `ctes` must define `input` with one row per event: "topic" text, "key" text, "payload" jsonb and
 * "ord" (arrival order), plus any columns of the caller's own; it may be preceded by the caller's
 * own CTEs (e.g. the INSERT the events describe), so the events commit with that write, in the same
 * statement. Returns "ord", "seq" and the `returning` columns of `input` per event.
 *
 * With `sessions`, `input` also has "link" (int, may be null): the "ord" of another event of the
 * batch whose seq is stamped into this one's payload as "sessionSeq" (an accountSessions event and
 * its sessionUpdated twin), and Session.seq follows each session's own stream.
 */
export function appendManySql(
  ctes: string,
  returning: readonly string[] = [],
  options: { sessions?: boolean } = {},
): string {
  const extra = returning.map((column) => `, "${column}"`).join('');
  const sessions = options.sessions === true;
  return `
WITH ${ctes}, counts AS (
  SELECT "topic", "key", count(*)::int AS "n" FROM input GROUP BY "topic", "key"
), c AS (
  INSERT INTO "RealtimeCursor" ("topic", "key", "seq")
  SELECT "topic", "key", "n" FROM counts ORDER BY "topic", "key"
  ON CONFLICT ("topic", "key") DO UPDATE SET "seq" = "RealtimeCursor"."seq" + EXCLUDED."seq"
  RETURNING "topic", "key", "seq"
), numbered AS (
  SELECT i."topic", i."key", i."payload", i."ord"${sessions ? ', i."link"' : ''}${returning.map((column) => `, i."${column}"`).join('')},
    (c."seq" - counts."n" + row_number() OVER (PARTITION BY i."topic", i."key" ORDER BY i."ord"))::int AS "seq"
  FROM input i JOIN c USING ("topic", "key") JOIN counts USING ("topic", "key")
)${
    sessions
      ? `, stamped AS (
  SELECT n."topic", n."key", n."seq", CASE WHEN n."link" IS NULL THEN n."payload"
    ELSE n."payload" || jsonb_build_object('sessionSeq', l."seq") END AS "payload"
  FROM numbered n LEFT JOIN numbered l ON l."ord" = n."link"
), s AS (
  UPDATE "Session" SET "seq" = c."seq" FROM c
  WHERE c."topic" = 'sessionUpdated'
    AND "Session"."id" = CASE WHEN c."topic" = 'sessionUpdated' THEN c."key"::uuid END
  RETURNING 1
)`
      : ''
  }, e AS (
  INSERT INTO "RealtimeEvent" ("topic", "key", "seq", "payload")
  SELECT "topic", "key", "seq", "payload" FROM ${sessions ? 'stamped' : 'numbered'}
  RETURNING 1
)
SELECT "ord"::int AS "ord", "seq"${extra} FROM numbered`;
}

/**
 * appendManySql for the events of one stream (`topic`, and `key`: an SQL expression), which need
 * no grouping, join or window: the cursor advances by their count and event "ord" (1…n) takes the
 * seq n - ord below its new value. `ctes` must define `input` with "payload" jsonb and "ord" (1…n,
 * arrival order). Returns one row, the batch's "first" seq and its count "n" (the events took
 * first…first + n - 1, in "ord" order); none when `input` is empty (the cursor is not touched).
 */
export function appendStreamSql(ctes: string, topic: StreamTopic, key: string): string {
  return `
WITH ${ctes}, counted AS (
  SELECT count(*)::int AS "n" FROM input
), c AS (
  INSERT INTO "RealtimeCursor" ("topic", "key", "seq")
  SELECT '${topic}', ${key}, "n" FROM counted WHERE "n" > 0
  ON CONFLICT ("topic", "key") DO UPDATE SET "seq" = "RealtimeCursor"."seq" + EXCLUDED."seq"
  RETURNING "seq"
), e AS (
  INSERT INTO "RealtimeEvent" ("topic", "key", "seq", "payload")
  SELECT '${topic}', ${key}, (c."seq" - counted."n" + i."ord")::int, i."payload"
  FROM c, counted, input i
  RETURNING 1
)
SELECT (c."seq" - counted."n" + 1)::int AS "first", counted."n" FROM c, counted`;
}

// $3: the payloads as one JSON array, joined from their JSON texts. As a jsonb[] node-pg escaped each
// payload again into an array literal (every quote of the JSON), on this thread, before sending.
const APPEND_MANY = appendManySql(
  `input AS (
  SELECT * FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), jsonb_array_elements($3::jsonb), unnest($4::int[]))
    WITH ORDINALITY AS t("topic", "key", "payload", "link", "ord")
)`,
  [],
  { sessions: true },
);

const RANGE = `SELECT "seq", "payload" FROM "RealtimeEvent"
WHERE "topic" = $1 AND "key" = $2 AND "seq" > $3 AND ($4::int IS NULL OR "seq" < $4::int)
ORDER BY "seq" LIMIT $5`;

/** Current seq of many (topic, key) pairs in one statement; pairs without a cursor are absent. */
const CURRENT_MANY = `SELECT t."ord"::int AS "ord", c."seq"
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t("topic", "key", "ord")
JOIN "RealtimeCursor" c ON c."topic" = t."topic" AND c."key" = t."key"`;

interface Pending {
  topic: string;
  key: string;
  payload: string;
  /** This event's payload gets the seq of the event queued just before it (see appendManySql). */
  stampsPrevious: boolean;
  resolve: (seq: number) => void;
  reject: (error: unknown) => void;
}

/** Events per grouped statement; a session's pair may take it one over. */
const MAX_GROUP = 500;

export function createEventLog(database: Database): EventLog {
  const raw = database.raw;
  // Group commit: appends that arrive while a batch is being written go out together in the next
  // statement, so a burst costs one round trip and one WAL flush instead of one per event. Events
  // queued together (a session's pair) stay in one statement.
  let queue: Pending[][] = [];
  let writing = false;
  async function flush(): Promise<void> {
    if (writing || queue.length === 0) return;
    writing = true;
    const batch: Pending[] = [];
    let units = 0;
    while (units < queue.length && batch.length < MAX_GROUP) batch.push(...queue[units++]!);
    queue = queue.slice(units);
    try {
      const rows = await raw.query<{ ord: number; seq: number }>(
        APPEND_MANY,
        [
          batch.map((p) => p.topic),
          batch.map((p) => p.key),
          `[${batch.map((p) => p.payload).join(',')}]`,
          // ords are 1-based: the event before the i-th (0-based) has ord i.
          batch.map((p, i) => (p.stampsPrevious ? i : null)),
        ],
        { prepared: 'event-log-append-many' },
      );
      const seqs = new Map(rows.map((r) => [Number(r.ord), Number(r.seq)]));
      batch.forEach((p, i) => {
        const seq = seqs.get(i + 1);
        if (seq === undefined) p.reject(new Error('event log batch returned no seq'));
        else p.resolve(seq);
      });
    } catch (error) {
      for (const p of batch) p.reject(error);
    } finally {
      writing = false;
      void flush();
    }
  }

  /** Queues events to be appended in one statement, in this order; resolves to their seqs. */
  function enqueue(events: ReadonlyArray<Omit<Pending, 'resolve' | 'reject'>>): Promise<number[]> {
    const unit: Pending[] = [];
    const seqs = events.map(
      (event) => new Promise<number>((resolve, reject) => unit.push({ ...event, resolve, reject })),
    );
    queue.push(unit);
    void flush();
    return Promise.all(seqs);
  }

  // Reads of the current seq batch the same way: every subscription without `after` reads its
  // baseline when it starts, and thousands start together when clients reconnect.
  const readCurrent = createKeyedBatcher<{ topic: string; key: string }, number>(
    async (_all, batch) => {
      const rows = await raw.query<{ ord: number; seq: number }>(
        CURRENT_MANY,
        [batch.map((r) => r.topic), batch.map((r) => r.key)],
        { prepared: 'event-log-current-many' },
      );
      const seqs = new Array<number>(batch.length).fill(0);
      for (const row of rows) seqs[Number(row.ord) - 1] = Number(row.seq);
      return seqs.map((value) => ({ ok: true, value }));
    },
    { maxBatch: 1_000 },
  );

  return {
    async append(topic, key, payload, tx) {
      if (!tx) {
        const [seq] = await enqueue([
          { topic, key, payload: JSON.stringify(payload), stampsPrevious: false },
        ]);
        return seq!;
      }
      const rows = await tx.$queryRawUnsafe<Array<{ seq: number }>>(
        APPEND(topic),
        topic,
        key,
        JSON.stringify(payload),
      );
      const seq = rows[0]?.seq;
      if (typeof seq !== 'number') throw new Error(`event log append returned no seq for ${topic}`);
      return seq;
    },
    appendMany(topic, key, payloads) {
      return enqueue(
        payloads.map((payload) => ({ topic, key, payload: JSON.stringify(payload), stampsPrevious: false })),
      );
    },
    async appendSession(payload) {
      const text = JSON.stringify(payload);
      const [seq, accountSeq] = await enqueue([
        { topic: 'sessionUpdated', key: payload.sessionId, payload: text, stampsPrevious: false },
        { topic: 'accountSessions', key: payload.accountId, payload: text, stampsPrevious: true },
      ]);
      return { seq: seq!, accountSeq: accountSeq! };
    },
    async range(topic, key, after, before, limit) {
      const rows = await raw.query<{ seq: number; payload: unknown }>(
        RANGE,
        [topic, key, after, before, limit],
        { prepared: 'event-log-range' },
      );
      return rows.map((row) => ({
        topic,
        key,
        seq: Number(row.seq),
        payload: (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as never,
      }));
    },
    currentSeq(topic, key) {
      return readCurrent('', { topic, key });
    },
    async prune(retentionMs) {
      const rows = await raw.query<{ n: number }>(
        `WITH d AS (DELETE FROM "RealtimeEvent" WHERE "at" < CURRENT_TIMESTAMP - ($1::int * interval '1 millisecond') RETURNING 1)
         SELECT count(*)::int AS n FROM d`,
        [retentionMs],
      );
      return Number(rows[0]?.n ?? 0);
    },
  };
}
