// Two processes' worth of pub/sub (each its own Redis connection and event log handle on one
// database) writing the same topic at once: every subscriber, live-only or resuming, on either
// side, receives every seq exactly once and in order — coalesced streams included — and a gap
// that cannot be filled ends the stream with an error carrying the seq to resume from.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createEventLog } from '../../resolvers/events/event-log';
import { type Database, openDatabase } from '../../server/db';
import { migrate } from '../../server/migrate';
import { type Envelope, type PubSub, StreamInterruptedError } from '../../resolvers/events/channels';
import { createPubSub } from '../../server/pubsub';
import { createRedisBroker, whenHealthy } from '../../server/pubsub-redis';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { TEST_REDIS_URL } from '../support/env';
import { streamStarted } from '../support/wait';

const EVENTS = Number(process.env.TWO_WRITERS_EVENTS ?? 200);
const logger = pino({ level: 'silent' });

describe('one topic written by two processes at once', () => {
  let testDb: TestDatabase;
  const databases: Database[] = [];
  const sides: PubSub[] = [];
  const channel = `singulacomp:test:${randomUUID()}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-two-writers-'));

  beforeAll(async () => {
    testDb = await createTestDatabase();
    for (let i = 0; i < 2; i++) {
      const database = await openDatabase({ url: testDb.url, dataDir });
      if (i === 0) await migrate(database.raw);
      databases.push(database);
      const pubsub = createPubSub({
        // Each side is its own origin on the channel, as two server processes are.
        broker: createRedisBroker({ url: TEST_REDIS_URL, logger, channel, originId: randomUUID() }),
        log: createEventLog(database),
        logger,
      });
      expect(await whenHealthy(pubsub, 10_000)).toBe(true);
      sides.push(pubsub);
    }
  });

  afterAll(async () => {
    for (const side of sides) await side.close();
    for (const database of databases) await database.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Seqs delivered until `last` is delivered (or the stream ends). */
  async function collect(stream: AsyncIterableIterator<Envelope>, last: number): Promise<number[]> {
    const seqs: number[] = [];
    while (seqs.at(-1) !== last) {
      const next = await stream.next();
      if (next.done) break;
      seqs.push(next.value.seq);
    }
    await stream.return?.();
    return seqs;
  }

  for (const coalesce of [false, true]) {
    test(`${coalesce ? 'coalesced' : 'ordered'} subscribers on both sides get seq 1…${EVENTS} exactly once while both sides publish`, async () => {
      const key = randomUUID();
      const [a, b] = sides as [PubSub, PubSub];
      const streams = [
        a.subscribe('telemetry', key, { coalesce }),
        b.subscribe('telemetry', key, { coalesce }),
        a.subscribe('telemetry', key, { coalesce, after: 0 }),
        b.subscribe('telemetry', key, { coalesce, after: 0 }),
      ];
      await Promise.all(streams.map(streamStarted));
      const reading = streams.map((s) => collect(s, EVENTS));
      // Both sides publish concurrently: a later seq dispatched locally regularly overtakes an
      // earlier one still travelling through Redis from the other side.
      await Promise.all(
        Array.from({ length: EVENTS }, (_, i) =>
          (i % 2 === 0 ? a : b).publish('telemetry', key, {
            sandboxId: key,
            sessionId: key,
            accountId: key,
            sampleId: String(i),
          } as never),
        ),
      );
      const expected = Array.from({ length: EVENTS }, (_, i) => i + 1);
      for (const seqs of await Promise.all(reading)) {
        if (!coalesce) {
          expect(seqs).toEqual(expected);
          continue;
        }
        // Coalescing may merge events the reader had not taken yet (newest wins), so a coalesced
        // reader sees a subset; but always in order, never a duplicate, and it ends at the newest.
        expect(seqs.at(-1)).toBe(EVENTS);
        expect(seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]!)).toBe(true);
      }
    });
  }

  test('a live subscriber given a later seq first still receives the earlier one, before it', async () => {
    const key = randomUUID();
    const b = sides[1]!;
    const stream = b.subscribe('telemetry', key);
    // Let the stream take its starting point (nothing published on the topic yet).
    await streamStarted(stream);
    const payload = (sampleId: string) =>
      ({ sandboxId: key, sessionId: key, accountId: key, sampleId }) as never;
    // Seq 1 is written by the other process and still on its way through Redis when seq 2 is
    // dispatched here: the deterministic version of one write overtaking another.
    const log = createEventLog(databases[0]!);
    const one = await log.append('telemetry', key, payload('first'));
    const two = await log.append('telemetry', key, payload('second'));
    await b.broadcast({ topic: 'telemetry', key, seq: two, payload: payload('second') } as Envelope);
    const received = await collect(stream, two);
    expect([one, two]).toEqual([1, 2]);
    expect(received).toEqual([1, 2]);
  });

  test('a gap that the log no longer holds ends the stream with REPLAY_UNAVAILABLE and the seq to resume from', async () => {
    const key = randomUUID();
    const [a] = sides as [PubSub, PubSub];
    for (let i = 0; i < 3; i++) {
      await a.publish('telemetry', key, {
        sandboxId: key,
        sessionId: key,
        accountId: key,
        sampleId: String(i),
      } as never);
    }
    const stream = a.subscribe('telemetry', key, { after: 3 });
    await a.publish('telemetry', key, {
      sandboxId: key,
      sessionId: key,
      accountId: key,
      sampleId: '3',
    } as never);
    const first = await stream.next();
    expect(first.value.seq).toBe(4);
    // Seq 5 is taken but never reaches the log or the broker (lost); 6 then arrives with a gap.
    await databases[0]!.raw.query(
      'UPDATE "RealtimeCursor" SET "seq" = "seq" + 1 WHERE "topic" = $1 AND "key" = $2',
      ['telemetry', key],
    );
    await a.publish('telemetry', key, {
      sandboxId: key,
      sessionId: key,
      accountId: key,
      sampleId: '5',
    } as never);
    const error = await stream.next().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StreamInterruptedError);
    expect((error as StreamInterruptedError).extensions).toMatchObject({
      code: 'REPLAY_UNAVAILABLE',
      seq: 4,
    });
  });
});
