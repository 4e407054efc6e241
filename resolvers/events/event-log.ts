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
 */
export function appendManySql(ctes: string, returning: readonly string[] = []): string {
  const extra = returning.map((column) => `, "${column}"`).join('');
  return `
WITH ${ctes}, counts AS (
  SELECT "topic", "key", count(*)::int AS "n" FROM input GROUP BY "topic", "key"
), c AS (
  INSERT INTO "RealtimeCursor" ("topic", "key", "seq")
  SELECT "topic", "key", "n" FROM counts ORDER BY "topic", "key"
  ON CONFLICT ("topic", "key") DO UPDATE SET "seq" = "RealtimeCursor"."seq" + EXCLUDED."seq"
  RETURNING "topic", "key", "seq"
), numbered AS (
  SELECT i."topic", i."key", i."payload", i."ord"${returning.map((column) => `, i."${column}"`).join('')},
    (c."seq" - counts."n" + row_number() OVER (PARTITION BY i."topic", i."key" ORDER BY i."ord"))::int AS "seq"
  FROM input i JOIN c USING ("topic", "key") JOIN counts USING ("topic", "key")
), e AS (
  INSERT INTO "RealtimeEvent" ("topic", "key", "seq", "payload")
  SELECT "topic", "key", "seq", "payload" FROM numbered
  RETURNING 1
)
SELECT "ord"::int AS "ord", "seq"${extra} FROM numbered`;
}

const APPEND_MANY = appendManySql(`input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS t("topic", "key", "payload", "ord")
)`);

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
  resolve: (seq: number) => void;
  reject: (error: unknown) => void;
}

export function createEventLog(database: Database): EventLog {
  const raw = database.raw;
  // Group commit: appends that arrive while a batch is being written go out together in the next
  // statement, so a burst costs one round trip and one WAL flush instead of one per event.
  let queue: Pending[] = [];
  let writing = false;
  async function flush(): Promise<void> {
    if (writing || queue.length === 0) return;
    writing = true;
    const batch = queue.slice(0, 500);
    queue = queue.slice(batch.length);
    try {
      const rows = await raw.query<{ ord: number; seq: number }>(
        APPEND_MANY,
        [batch.map((p) => p.topic), batch.map((p) => p.key), batch.map((p) => p.payload)],
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
      const params = [topic, key, JSON.stringify(payload)];
      if (!tx && topic !== 'sessionUpdated') {
        return new Promise<number>((resolve, reject) => {
          queue.push({ topic, key, payload: params[2]!, resolve, reject });
          void flush();
        });
      }
      const rows = tx
        ? await tx.$queryRawUnsafe<Array<{ seq: number }>>(APPEND(topic), ...params)
        : await raw.query<{ seq: number }>(APPEND(topic), params);
      const seq = rows[0]?.seq;
      if (typeof seq !== 'number') throw new Error(`event log append returned no seq for ${topic}`);
      return seq;
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
