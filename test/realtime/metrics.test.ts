// /metrics for realtime: open subscriptions by field (graphql-ws's own client against a real
// server) and pub/sub lag, measured on the receiving process for events another process published
// through Redis.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PubSub } from '../../resolvers/events/channels';
import { createEventLog } from '../../resolvers/events/event-log';
import { type Database, openDatabase } from '../../server/db';
import { createPubSub } from '../../server/pubsub';
import { createRedisBroker, whenHealthy } from '../../server/pubsub-redis';
import { AccountSessionsDocument, SessionUpdatedDocument, StopSessionDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { TEST_REDIS_URL } from '../support/env';
import { createTestProject, createTestSession, type TestSession } from '../support/fixtures';
import { waitFor } from '../support/wait';
import { type Socket, openSocket, watch } from './helpers';

const logger = pino({ level: 'silent' });

/** The value of one sample line (`name{labels} value`), or null when absent. */
async function sample(t: TestApp, series: string): Promise<number | null> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : null;
}

describe('realtime metrics', () => {
  let testDb: TestDatabase;
  const databases: Database[] = [];
  let publisher: PubSub;
  let t: TestApp;
  let session: TestSession;
  const sockets: Socket[] = [];
  const channel = `singulacomp:test:${randomUUID()}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-rt-metrics-'));

  /** A pub/sub side of its own (own origin on a private Redis channel), as another process has. */
  async function side(): Promise<PubSub> {
    const database = await openDatabase({ url: testDb.url, dataDir });
    databases.push(database);
    const pubsub = createPubSub({
      broker: createRedisBroker({ url: TEST_REDIS_URL, logger, channel, originId: randomUUID() }),
      log: createEventLog(database),
      logger,
    });
    expect(await whenHealthy(pubsub, 10_000)).toBe(true);
    return pubsub;
  }

  beforeAll(async () => {
    testDb = await createTestDatabase();
    t = await startTestApp({ databaseUrl: testDb.url, pubsub: await side() });
    publisher = await side();
    const project = await createTestProject(t, 'rt-metrics');
    session = await createTestSession(t, project.id);
  });

  afterAll(async () => {
    for (const socket of sockets) await socket.dispose();
    if (session) await t?.request(StopSessionDocument, { input: { sessionId: session.id } });
    await t?.stop();
    await publisher?.close();
    for (const database of databases) await database.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the subscription gauge counts open subscriptions by field and drops after unsubscribe', async () => {
    const accounts = 'singulacomp_graphql_subscriptions{field="accountSessions"}';
    const sessions = 'singulacomp_graphql_subscriptions{field="sessionUpdated"}';
    const first = openSocket(t.wsUrl, t.adminToken);
    const second = openSocket(t.wsUrl, t.adminToken);
    sockets.push(first, second);
    const a1 = watch(first, AccountSessionsDocument, {});
    const a2 = watch(second, AccountSessionsDocument, {});
    const s1 = watch(first, SessionUpdatedDocument, { id: session.id });
    await waitFor(async () => (await sample(t, accounts)) === 2 && (await sample(t, sessions)) === 1, 20_000);
    expect(await sample(t, accounts)).toBe(2);
    expect(await sample(t, sessions)).toBe(1);
    expect([...a1.errors, ...a2.errors, ...s1.errors]).toEqual([]);

    a1.unsubscribe();
    await waitFor(async () => (await sample(t, accounts)) === 1, 20_000);
    expect(await sample(t, sessions)).toBe(1);
    s1.unsubscribe();
    await waitFor(async () => (await sample(t, sessions)) === 0, 20_000);
    expect(await sample(t, accounts)).toBe(1);
    // Closing the socket ends its subscriptions as well.
    await second.dispose();
    await waitFor(async () => (await sample(t, accounts)) === 0, 20_000);
    expect(await sample(t, sessions)).toBe(0);
  });

  test('events another process publishes are counted in the pub/sub lag histogram on arrival', async () => {
    const count = 'singulacomp_pubsub_lag_seconds_count{topic="changeRequestUpdated"}';
    const inf = 'singulacomp_pubsub_lag_seconds_bucket{le="+Inf",topic="changeRequestUpdated"}';
    const before = (await sample(t, count)) ?? 0;
    const key = randomUUID();
    for (let i = 0; i < 5; i++) {
      await publisher.publish('changeRequestUpdated', key, {
        changeRequestId: key,
        projectId: randomUUID(),
        accountId: randomUUID(),
        status: 'OPEN',
      });
    }
    await waitFor(async () => (await sample(t, count)) === before + 5, 20_000);
    expect(await sample(t, count)).toBe(before + 5);
    expect(await sample(t, inf)).toBe(before + 5);
    const sum = await sample(t, 'singulacomp_pubsub_lag_seconds_sum{topic="changeRequestUpdated"}');
    expect(sum).toBeGreaterThanOrEqual(0);
    // The app's own events never travel back to it through Redis: only the other side's count.
    expect(await sample(t, 'singulacomp_pubsub_lag_seconds_count{topic="sessionUpdated"}')).toBeNull();
  });
});
