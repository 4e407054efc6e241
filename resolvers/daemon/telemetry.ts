// Telemetry samples from the daemon (R-AG-4): validated, persisted, published after commit, pruned.
//
// Throughput: a sandbox token's claims already name its session, sandbox and account, so a report
// needs no read at all. Reports arriving together are group-committed: one statement per batch
// (flushed on the next tick of the event loop, or at `maxBatch` rows) inserts the samples and
// appends their telemetry events to the realtime event log, which are broadcast once it committed;
// each caller gets its own row back. It is one constant SQL text over arrays (unnest), sent as raw
// SQL: no per-batch query planning in Prisma, whatever the batch size. Retention is enforced off the
// hot path: per sandbox every `pruneEvery` inserts (keep the newest `keepPerSandbox`), and by age from the
// reaper's fleet-wide tick (`pruneExpired`).
import type { TelemetrySample } from '../../prisma/generated/client/client';
import type { Db, RawSql } from '../platform';
import type { Logger } from '../platform';
import type { Channels, Envelope } from '../events/channels';
import { appendManySql } from '../events/event-log';
import { ValidationError, forbidden } from '../errors';
import type { ReportTelemetryInput as TelemetryInput } from '../../contract/daemon-api';
import type { Events } from '../events/events';
import { createKeyedBatcher } from '../batch';
import { parseId } from '../ids';
import type { Principal } from '../auth/principal';
import { assertDaemon } from '../auth/policy';

/** What the daemon sends (docs/agent-api.md): one type for both ends of the wire. */
export type ReportTelemetryInput = TelemetryInput;

export interface TelemetryServiceOptions {
  db: Db;
  /** The same database without Prisma (cheapest path for the batch INSERT); Prisma's raw SQL otherwise. */
  sql?: RawSql;
  events: Events;
  logger: Logger;
  /** Newest samples kept per sandbox. @default 1_440 (a day at one per minute) */
  keepPerSandbox?: number;
  /** Samples older than this are deleted by pruneExpired. @default 7 days */
  maxAgeMs?: number;
  /** Per-sandbox inserts between two count-based prunes. @default 100 */
  pruneEvery?: number;
  /** Largest group-committed INSERT. @default 500 */
  maxBatch?: number;
  /**
   * Group-committed INSERTs running at once; reports arriving meanwhile wait for the next. One
   * answered more reports per second than two (8-31 % in alternating rounds on two cores, with
   * less PostgreSQL CPU per report): its batches are twice as large for the same round trip.
   * @default 1
   */
  maxFlushesInFlight?: number;
  now?: () => number;
}

/** Largest byte count accepted (1 PiB): anything above is a unit mistake, not a sandbox. */
export const MAX_BYTES = 2 ** 50;
export const MAX_LOAD1 = 100_000;

const BYTE_FIELDS = [
  'memoryUsedBytes',
  'memoryLimitBytes',
  'diskUsedBytes',
  'diskTotalBytes',
  'daemonRssBytes',
  'opencodeRssBytes',
] as const;

export type TelemetryService = ReturnType<typeof createTelemetryService>;

/** Row order of the float columns in INSERT_BATCH ($3 … $9). */
const BYTE_AND_LOAD_COLUMNS = [
  'memoryUsedBytes',
  'memoryLimitBytes',
  'load1',
  'diskUsedBytes',
  'diskTotalBytes',
  'daemonRssBytes',
  'opencodeRssBytes',
] as const;

// One statement per batch, whatever its size: the samples and their telemetry events (the realtime
// event log) commit together, so an event never describes a sample that is not stored and a stored
// sample always has its event. Ids are drawn per input row (in a materialized CTE) and returned
// with the row's position, so each caller gets its own id without relying on the order of RETURNING.
// The reasons travel as text[] and are cast inside: PGlite serializes a parameter by its declared
// type and has no serializer for an enum array, so `$10::text[]::"TelemetryReason"[]` reached it as the
// JS array's toString() ("malformed array literal") and every report failed on the embedded default.
const INSERT_BATCH = appendManySql(
  `samples AS (
  SELECT nextval(pg_get_serial_sequence('"TelemetrySample"', 'id')) AS "id", t.*
  FROM unnest($1::uuid[], $2::timestamp(3)[], $3::float8[], $4::float8[], $5::float8[], $6::float8[],
    $7::float8[], $8::float8[], $9::float8[], $10::text[]::"TelemetryReason"[], $11::jsonb[])
    WITH ORDINALITY AS t("sandboxId", "at", "memoryUsedBytes", "memoryLimitBytes", "load1", "diskUsedBytes",
      "diskTotalBytes", "daemonRssBytes", "opencodeRssBytes", "reason", "event", "ord")
), inserted AS (
  INSERT INTO "TelemetrySample" ("id", "sandboxId", "at", "memoryUsedBytes", "memoryLimitBytes", "load1",
    "diskUsedBytes", "diskTotalBytes", "daemonRssBytes", "opencodeRssBytes", "reason")
  SELECT "id", "sandboxId", "at", "memoryUsedBytes", "memoryLimitBytes", "load1", "diskUsedBytes",
    "diskTotalBytes", "daemonRssBytes", "opencodeRssBytes", "reason" FROM samples
  RETURNING 1
), input AS (
  SELECT 'telemetry'::text AS "topic", "sandboxId"::text AS "key",
    "event" || jsonb_build_object('sampleId', "id"::text) AS "payload", "ord", "id"
  FROM samples
)`,
  ['id'],
);

/** Who owns each sandbox of a list (the telemetry subscription's capability check), in one statement. */
const SANDBOX_OWNERS = `SELECT "id"::text AS "id", "sessionId"::text AS "sessionId", "accountId"::text AS "accountId"
FROM "Sandbox" WHERE "id" = ANY($1::uuid[])`;

export type SandboxOwner = {
  id: string;
  sessionId: string;
  accountId: string;
};

type Row = Omit<TelemetrySample, 'id'>;
/** The telemetry event without its sampleId (known once the row is inserted). */
type EventBody = Omit<Channels['telemetry'], 'sampleId'>;
interface Pending {
  row: Row;
  event: EventBody;
  resolve: (stored: { sample: TelemetrySample; envelope: Envelope<'telemetry'> }) => void;
  reject: (error: unknown) => void;
}

export function validateTelemetry(input: ReportTelemetryInput): void {
  const check = (name: string, value: number, max: number) => {
    if (!Number.isFinite(value) || value < 0 || value > max) {
      throw new ValidationError(`${name} must be a finite number between 0 and ${max}.`, ['input', name]);
    }
  };
  for (const name of BYTE_FIELDS) check(name, input[name], MAX_BYTES);
  check('load1', input.load1, MAX_LOAD1);
}

export function createTelemetryService(options: TelemetryServiceOptions) {
  const { db, events } = options;
  const log = options.logger.child({ module: 'telemetry' });
  const now = options.now ?? Date.now;
  const keepPerSandbox = options.keepPerSandbox ?? 1_440;
  const maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3_600_000;
  const pruneEvery = options.pruneEvery ?? 100;
  const maxBatch = options.maxBatch ?? 500;
  const maxFlushes = options.maxFlushesInFlight ?? 1;
  let queue: Pending[] = [];
  let scheduled = false;
  const inFlight = new Set<Promise<void>>();
  const sinceprune = new Map<string, number>();
  const pruning = new Set<string>();

  /** Raw SQL without Prisma where the service has it (the cheapest path), Prisma's raw SQL otherwise. */
  function query<T extends Record<string, unknown>>(
    text: string,
    params: unknown[],
    prepared: string,
  ): Promise<T[]> {
    return options.sql
      ? options.sql.query<T>(text, params, { prepared })
      : db.$queryRawUnsafe<T[]>(text, ...params);
  }

  // Owner reads are batched like the inserts: when clients reconnect, thousands of telemetry
  // subscriptions start together, and one read per statement (rather than one each) keeps them cheap.
  const readOwner = createKeyedBatcher<string, SandboxOwner | null>(
    async (_all, ids) => {
      const rows = await query<SandboxOwner>(SANDBOX_OWNERS, [ids], 'telemetry-sandbox-owners');
      const byId = new Map(rows.map((row) => [row.id, row]));
      return ids.map((id) => ({ ok: true, value: byId.get(id) ?? null }));
    },
    { maxBatch: 1_000 },
  );

  async function insert(batch: Pending[]): Promise<Array<{ ord: number; seq: number; id: unknown }>> {
    const params = [
      batch.map((p) => p.row.sandboxId),
      // timestamp(3) without time zone holds UTC wall-clock time (as Prisma writes it); the Z is ignored.
      batch.map((p) => p.row.at.toISOString()),
      ...BYTE_AND_LOAD_COLUMNS.map((column) => batch.map((p) => p.row[column])),
      batch.map((p) => p.row.reason),
      batch.map((p) => JSON.stringify(p.event)),
    ];
    return query<{ ord: number; seq: number; id: unknown }>(INSERT_BATCH, params, 'telemetry-insert-batch');
  }

  async function flush(batch: Pending[]): Promise<void> {
    const results: Array<{ seq: number; id: unknown }> = [];
    try {
      for (const r of await insert(batch)) results[Number(r.ord) - 1] = r;
    } catch (error) {
      for (const p of batch) p.reject(error);
      return;
    }
    // The stored row is exactly what was sent (floats and millisecond timestamps round-trip) plus its id.
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      const result = results[i];
      if (result?.id === undefined || result.id === null) {
        p.reject(new Error('telemetry batch returned no id'));
        continue;
      }
      const id = BigInt(result.id as string | number | bigint);
      const { sandboxId, sessionId, accountId, sample } = p.event;
      p.resolve({
        sample: { id, ...p.row },
        envelope: {
          topic: 'telemetry',
          key: sandboxId,
          seq: Number(result.seq),
          payload: { sandboxId, sessionId, accountId, sampleId: id.toString(), sample },
        },
      });
    }
    for (const row of batch) countInsert(row.row.sandboxId);
  }

  /**
   * Sends what is queued as INSERTs of up to maxBatch rows, with at most maxFlushes of them in
   * flight: reports that arrive while they run wait and go together in the next one (group
   * commit), so under load a statement carries many rows instead of each tick sending its own.
   */
  function drain(): void {
    scheduled = false;
    while (queue.length > 0 && inFlight.size < maxFlushes) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(batch.length);
      const work = flush(batch);
      inFlight.add(work);
      void work.finally(() => {
        inFlight.delete(work);
        if (queue.length > 0) drain();
      });
    }
  }

  function countInsert(sandboxId: string): void {
    const count = (sinceprune.get(sandboxId) ?? 0) + 1;
    if (count < pruneEvery) {
      sinceprune.set(sandboxId, count);
      return;
    }
    sinceprune.delete(sandboxId);
    if (pruning.has(sandboxId)) return;
    pruning.add(sandboxId);
    void pruneSandbox(sandboxId)
      .catch((error: unknown) => log.warn({ sandboxId, err: error }, 'telemetry prune failed'))
      .finally(() => pruning.delete(sandboxId));
  }

  /** Deletes all but the newest `keepPerSandbox` samples of one sandbox (index-only lookup of the cut). */
  async function pruneSandbox(sandboxId: string): Promise<number> {
    return db.$executeRaw`
      DELETE FROM "TelemetrySample"
      WHERE "sandboxId" = ${sandboxId}::uuid
        AND "at" < (
          SELECT "at" FROM "TelemetrySample" WHERE "sandboxId" = ${sandboxId}::uuid
          ORDER BY "at" DESC, "id" DESC OFFSET ${keepPerSandbox - 1} LIMIT 1
        )`;
  }

  return {
    /** reportTelemetry: only the sandbox's own token; returns the stored sample once committed. */
    async report(principal: Principal | null, input: ReportTelemetryInput): Promise<TelemetrySample> {
      const sandboxId = parseId(input.sandboxId, 'Sandbox', ['input', 'sandboxId']);
      assertDaemon(principal, 'Only the sandbox token can report telemetry.');
      if (principal.sandboxId !== sandboxId) {
        throw forbidden('A sandbox token can only report telemetry for its own sandbox.');
      }
      validateTelemetry(input);
      const row: Row = {
        sandboxId,
        at: new Date(now()),
        memoryUsedBytes: input.memoryUsedBytes,
        memoryLimitBytes: input.memoryLimitBytes,
        load1: input.load1,
        diskUsedBytes: input.diskUsedBytes,
        diskTotalBytes: input.diskTotalBytes,
        daemonRssBytes: input.daemonRssBytes,
        opencodeRssBytes: input.opencodeRssBytes,
        reason: input.reason,
      };
      const event: EventBody = {
        sandboxId,
        sessionId: principal.sessionId,
        accountId: principal.accountId,
        // Subscribers deliver the sample from the event itself, without reading it back.
        sample: {
          at: row.at.toISOString(),
          memoryUsedBytes: row.memoryUsedBytes,
          memoryLimitBytes: row.memoryLimitBytes,
          load1: row.load1,
          diskUsedBytes: row.diskUsedBytes,
          diskTotalBytes: row.diskTotalBytes,
          daemonRssBytes: row.daemonRssBytes,
          opencodeRssBytes: row.opencodeRssBytes,
          reason: row.reason,
        },
      };
      const { sample, envelope } = await new Promise<{
        sample: TelemetrySample;
        envelope: Envelope<'telemetry'>;
      }>((resolve, reject) => {
        queue.push({ row, event, resolve, reject });
        if (queue.length >= maxBatch) drain();
        else if (!scheduled) {
          scheduled = true;
          setImmediate(drain);
        }
      });
      // Logged with the sample (same statement); delivered once that committed.
      await events.broadcast([envelope]);
      return sample;
    },

    pruneSandbox,

    /** The sandbox's session and account (null: no such sandbox); `id` must be a valid UUID. */
    sandboxOwner(id: string): Promise<SandboxOwner | null> {
      return readOwner('', id);
    },

    /** Sandbox.latestTelemetry: the sandbox's newest sample or null (`query`: the GraphQL selection). */
    latest<Q extends object>(sandboxId: string, query?: Q) {
      return db.telemetrySample.findFirst({
        ...(query ?? {}),
        where: { sandboxId },
        orderBy: [{ at: 'desc' }, { id: 'desc' }],
      });
    },

    /** One sample by id, for an event that did not carry it; throws when it is gone. */
    sample<Q extends object>(id: bigint, query?: Q) {
      return db.telemetrySample.findUniqueOrThrow({ ...(query ?? {}), where: { id } });
    },

    /** Deletes samples older than the retention age (run by one process: the reaper's tick). */
    async pruneExpired(): Promise<number> {
      return db.$executeRaw`DELETE FROM "TelemetrySample" WHERE "at" < ${new Date(now() - maxAgeMs)}`;
    },

    /** Waits for queued inserts (shutdown). */
    async drain(): Promise<void> {
      drain();
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}
