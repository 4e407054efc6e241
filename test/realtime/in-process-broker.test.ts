// The pub/sub of a single process (no REDIS_URL): every event reaches this process's subscribers
// once, by the local dispatch, and nothing comes back through the broker. An event handed back
// would be counted in the pub/sub lag histogram (with a lag of zero, carried by no transport) and a
// control event would fire its listeners twice.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Envelope, PubSub } from '../../resolvers/events/channels';
import { createEventLog } from '../../resolvers/events/event-log';
import { type Database, openDatabase } from '../../server/db';
import { migrate } from '../../server/migrate';
import { createInProcessBroker, createPubSub } from '../../server/pubsub';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { streamStarted } from '../support/wait';

const logger = pino({ level: 'silent' });

describe('the in-process pub/sub', () => {
  let testDb: TestDatabase;
  let database: Database;
  let pubsub: PubSub;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-in-process-'));

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ url: testDb.url, dataDir });
    await migrate(database.raw);
    pubsub = createPubSub({ broker: createInProcessBroker(), log: createEventLog(database), logger });
  });

  afterAll(async () => {
    await pubsub?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('delivers each event once, in order, and hands none back as received', async () => {
    const received: string[] = [];
    const offReceived = pubsub.onReceived((topic) => received.push(topic));
    const key = randomUUID();
    const live = pubsub.subscribe('sessionEvents', key, { after: null });
    const resumed = pubsub.subscribe('sessionEvents', key, { after: 0 });
    await Promise.all([live, resumed].map(streamStarted));
    const event = (i: number) => ({
      sessionId: key,
      accountId: key,
      event: { kind: 'TEXT_DELTA' as const, opencodeSessionId: 'ses', delta: `w${i}` },
    });
    await pubsub.publishMany('sessionEvents', key, [event(0), event(1), event(2)]);
    await pubsub.publish('sessionEvents', key, event(3));
    for (const stream of [live, resumed]) {
      const seen: Envelope<'sessionEvents'>[] = [];
      for (let i = 0; i < 4; i++) seen.push((await stream.next()).value as Envelope<'sessionEvents'>);
      expect(seen.map((e) => [e.seq, (e.payload.event as { delta: string }).delta])).toEqual([
        [1, 'w0'],
        [2, 'w1'],
        [3, 'w2'],
        [4, 'w3'],
      ]);
      await stream.return?.();
    }
    offReceived();
    expect(received).toEqual([]);
  });

  test('a control event fires its listeners once', async () => {
    const tokenIds: string[] = [];
    const off = pubsub.onControl('tokenRevoked', ({ tokenId }) => tokenIds.push(tokenId));
    const tokenId = randomUUID();
    await pubsub.publish('tokenRevoked', tokenId, { tokenId });
    off();
    expect(tokenIds).toEqual([tokenId]);
  });
});
