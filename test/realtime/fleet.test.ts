// Two real server processes sharing one PostgreSQL and one Redis (a redis-server this file starts
// on its own port), watched with graphql-ws's own client.
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decrypt } from '../../resolvers/auth/crypto';
import { loadKeys } from '../../server/keys';
import {
  AccountSessionsDocument,
  CreatePersonalAccessTokenDocument,
  CreateProjectDocument,
  RealtimeCreateSessionDocument,
  RealtimeRevokeTokenDocument,
  RealtimeStopSessionDocument,
  SessionDocument,
  SessionUpdatedDocument,
} from '../generated/graphql';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { createTestRepo } from '../support/git';
import {
  type RedisProcess,
  type ServerProcess,
  startRedisProcess,
  startServerProcess,
} from '../support/server-process';
import { TEST_SECRET_KEY, postGraphql } from '../support/spawn-server';
import { waitFor } from '../support/wait';
import { type Received, type Socket, openSocket, watch } from './helpers';

const summary = (e: Received<{ accountSessions: { sessionId: string; status: string } }>) =>
  [e.data.accountSessions.sessionId, e.data.accountSessions.status, e.seq] as const;

describe('realtime across two server processes sharing PostgreSQL and Redis', () => {
  let database: TestDatabase;
  let redis: RedisProcess;
  let a: ServerProcess;
  let b: ServerProcess;
  let sql: pg.Client;
  let adminToken: string;
  let projectId: string;
  const sockets: Socket[] = [];
  const repo = createTestRepo({ 'README.md': '# realtime\n' });

  async function gql<T, V>(
    server: ServerProcess,
    doc: TypedDocumentNode<T, V>,
    variables: V,
    token = adminToken,
  ) {
    const res = await postGraphql(server.graphqlUrl, { query: print(doc), variables }, token);
    if (res.json.errors) throw new Error(JSON.stringify(res.json.errors));
    return res.json.data as T;
  }

  function socket(server: ServerProcess, token = adminToken): Socket {
    const s = openSocket(server.wsUrl, token);
    sockets.push(s);
    return s;
  }

  /** Creates a session through `server` and waits until it runs; returns its UUID. */
  async function runningSession(server: ServerProcess): Promise<string> {
    const created = await gql(server, RealtimeCreateSessionDocument, { input: { projectId } });
    if (created.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(created));
    const id = created.createSession.session.sessionId;
    await waitFor(async () => (await gql(server, SessionDocument, { id })).session?.status === 'RUNNING');
    return id;
  }

  /** The latest seq on a stream: subscribing with it as `after` misses nothing that follows. */
  async function cursor(topic: string, key: string): Promise<number> {
    const { rows } = await sql.query('SELECT "seq" FROM "RealtimeCursor" WHERE "topic" = $1 AND "key" = $2', [
      topic,
      key,
    ]);
    return rows[0] ? Number(rows[0].seq) : 0;
  }
  let accountId: string;

  async function stop(server: ServerProcess, sessionId: string) {
    const stopped = await gql(server, RealtimeStopSessionDocument, { input: { sessionId } });
    if (stopped.stopSession.__typename !== 'StopSessionSuccess') throw new Error(JSON.stringify(stopped));
    return stopped.stopSession.session;
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    redis = await startRedisProcess();
    a = await startServerProcess({ databaseUrl: database.url, redisUrl: redis.url });
    b = await startServerProcess({ databaseUrl: database.url, redisUrl: redis.url });
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    const { readFileSync, existsSync } = await import('node:fs');
    const file = [a, b].map((s) => `${s.dataDir}/bootstrap-token`).find((f) => existsSync(f));
    if (!file) throw new Error('no bootstrap token');
    adminToken = readFileSync(file, 'utf8').trim();
    const project = await gql(a, CreateProjectDocument, { input: { name: 'rt', repositoryUrl: repo.url } });
    if (project.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(project));
    projectId = project.createProject.project.id;
    accountId = (await sql.query('SELECT "accountId" FROM "Project" LIMIT 1')).rows[0].accountId;
  });

  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.dispose().catch(() => {})));
    await sql?.end();
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    await database?.drop();
  });

  test('a session stopped through one process reaches its subscriber on the other, with the seq the mutation returned', async () => {
    const id = await runningSession(a);
    const s = socket(b);
    const w = watch(s, SessionUpdatedDocument, { id, after: await cursor('sessionUpdated', id) });
    const stopped = await stop(a, id);
    // The daemon's reports while its agent starts update the session too; the stop's event is the
    // one that says STOPPED, and whatever came before it is older.
    const event = await waitFor(() => w.events.find((e) => e.data.sessionUpdated.status === 'STOPPED'));
    const before = w.events.slice(0, w.events.indexOf(event));
    expect(before.filter((e) => e.seq >= stopped.seq || e.data.sessionUpdated.sessionId !== id)).toEqual([]);
    expect(event!.data.sessionUpdated).toMatchObject({
      sessionId: id,
      status: 'STOPPED',
      stopReason: 'USER',
    });
    expect(event!.seq).toBe(stopped.seq);
    expect(event!.data.sessionUpdated.seq).toBe(stopped.seq);
    const [stored] = (await sql.query('SELECT "seq" FROM "Session" WHERE "id" = $1', [id])).rows;
    expect(stored.seq).toBe(stopped.seq);
    w.unsubscribe();
  });

  test('a subscriber that disconnects, misses events and resumes with after receives exactly those, in order, then live ones', async () => {
    const from = await cursor('accountSessions', accountId);
    // A subscriber that stays connected (on the other process) is the reference.
    const control = watch(socket(a), AccountSessionsDocument, { after: from });
    let s = socket(b);
    let w = watch(s, AccountSessionsDocument, { after: from });
    const first = await runningSession(a);
    await waitFor(async () => w.events.some((e) => e.data.accountSessions.status === 'RUNNING'));
    await s.dispose();
    const lastSeq = w.events.at(-1)!.seq;
    expect(w.events.map((e) => e.seq)).toEqual(w.events.map((_, i) => from + 1 + i));

    /** Waits until `events()` holds `status` for session `id`. */
    const saw = (events: () => typeof control.events, id: string, status: string) =>
      waitFor(
        async () =>
          events().some(
            (e) => e.data.accountSessions.sessionId === id && e.data.accountSessions.status === status,
          ),
        20_000,
        `the ${status} event of session ${id}`,
      );

    // Missed while disconnected: the first session's stop, then three more sessions' whole lives.
    await stop(a, first);
    const others: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await runningSession(i % 2 === 0 ? a : b);
      // The RUNNING event goes out after the row changed and carries the row as it is then: a stop
      // landing in between would fold it into the stop's snapshot. Stop once it is out.
      await saw(() => control.events, id, 'RUNNING');
      await stop(i % 2 === 0 ? b : a, id);
      others.push(id);
    }
    await saw(() => control.events, others.at(-1)!, 'STOPPED');
    const missed = control.events.filter((e) => e.seq > lastSeq).map(summary);
    expect(missed.length).toBeGreaterThanOrEqual(10);
    expect(missed.map((e) => e[2])).toEqual(missed.map((_, i) => lastSeq + 1 + i));
    for (const id of others) {
      expect(missed.filter((e) => e[0] === id).map((e) => e[1])).toEqual(
        expect.arrayContaining(['PROVISIONING', 'RUNNING', 'STOPPED']),
      );
    }

    s = socket(b);
    w = watch(s, AccountSessionsDocument, { after: lastSeq });
    const replayed = await w.waitForEvents(missed.length);
    expect(replayed.map(summary)).toEqual(missed);
    expect(replayed[0]).toMatchObject({ data: { accountSessions: { sessionId: first, status: 'STOPPED' } } });

    // Then live, still without duplicates or gaps, identical to the reference.
    const live = await runningSession(a);
    await stop(b, live);
    await saw(() => w.events, live, 'STOPPED');
    const tail = () => control.events.filter((e) => e.seq > lastSeq);
    await saw(tail, live, 'STOPPED');
    await waitFor(async () => w.events.length >= tail().length);
    expect(w.events.map(summary)).toEqual(control.events.filter((e) => e.seq > lastSeq).map(summary));
  });

  test('revoking a token closes its sockets on both processes with 4403', async () => {
    const created = await gql(a, CreatePersonalAccessTokenDocument, {
      input: { name: 'watcher', scopes: ['sessions:read'] },
    });
    if (created.createPersonalAccessToken.__typename !== 'CreateTokenSuccess') throw new Error('token');
    const { secret, token } = created.createPersonalAccessToken;
    const onA = socket(a, secret);
    const onB = socket(b, secret);
    const wa = watch(onA, AccountSessionsDocument, {});
    const wb = watch(onB, AccountSessionsDocument, {});
    await waitFor(async () => onA.connected && onB.connected, 10_000);
    expect(onA.closes).toEqual([]);
    expect(onB.closes).toEqual([]);

    const revoked = await gql(a, RealtimeRevokeTokenDocument, { input: { tokenId: token.id } });
    expect(revoked.revokeToken.__typename).toBe('RevokeTokenSuccess');
    await waitFor(async () => onA.closes.length > 0 && onB.closes.length > 0, 10_000);
    expect(onA.closes).toEqual([4403]);
    expect(onB.closes).toEqual([4403]);
    expect(wa.events).toEqual([]);
    expect(wb.events).toEqual([]);
    // Reconnecting with the revoked token is refused outright.
    const again = socket(b, secret);
    await waitFor(async () => again.closes.length > 0, 10_000);
    expect(again.closes[0]).toBe(4401);
  });

  test('a sandbox token watches its own session but another session is FORBIDDEN, and stopping the session closes its socket', async () => {
    const own = await runningSession(a);
    const other = await runningSession(b);
    const [row] = (await sql.query('SELECT "sandboxTokenEnc" FROM "Sandbox" WHERE "sessionId" = $1', [own]))
      .rows;
    const keys = loadKeys({ secretKey: TEST_SECRET_KEY, dataDir: a.dataDir });
    const sandboxToken = decrypt(keys.encryption, row.sandboxTokenEnc as string);

    const s = socket(b, sandboxToken);
    const denied = watch(s, SessionUpdatedDocument, { id: other });
    const error = await denied.waitForError();
    expect(error.extensions?.code).toBe('FORBIDDEN');
    expect(denied.events).toEqual([]);

    const mine = watch(s, SessionUpdatedDocument, { id: own, after: 0 });
    const ownSeq = await cursor('sessionUpdated', own);
    const replay = await mine.waitForEvents(ownSeq);
    expect(replay.map((e) => e.seq)).toEqual(replay.map((_, i) => i + 1));
    expect(replay[0]!.data.sessionUpdated.status).toBe('PROVISIONING');
    expect(replay.at(-1)!.data.sessionUpdated.status).toBe('RUNNING');

    // Stopping the session (on the other process) revokes the sandbox token.
    await stop(a, own);
    await waitFor(async () => s.closes.length > 0, 15_000);
    expect(s.closes).toEqual([4403]);
    await stop(b, other);
  });

  test('with Redis stopped, writes succeed and subscribers are told; after the restart they resume with no lost event', async () => {
    const s = socket(b);
    const w = watch(s, AccountSessionsDocument, { after: await cursor('accountSessions', accountId) });
    const before = await runningSession(a);
    await waitFor(async () => w.events.some((e) => e.data.accountSessions.status === 'RUNNING'));

    await redis.kill();
    const error = await w.waitForError(15_000);
    const lastSeq = w.events.at(-1)!.seq;
    expect(error.extensions).toMatchObject({ code: 'PUBSUB_UNAVAILABLE', seq: lastSeq });
    await waitFor(async () => (await a.readyz()).status === 503 && (await b.readyz()).status === 503, 15_000);
    expect((await b.readyz()).body).toMatchObject({ pubsub: false, database: true });

    // Writes while Redis is down, through both processes.
    const stoppedBefore = await stop(a, before);
    expect(stoppedBefore.status).toBe('STOPPED');
    const during = await runningSession(b);
    await stop(b, during);
    const stored = await sql.query(
      'SELECT "status" FROM "Session" WHERE "id" = ANY($1::uuid[]) ORDER BY "createdAt"',
      [[before, during]],
    );
    expect(stored.rows.map((r) => r.status)).toEqual(['STOPPED', 'STOPPED']);

    // A subscriber retrying during the outage is told again, not left waiting.
    const retry = watch(s, AccountSessionsDocument, { after: lastSeq });
    expect((await retry.waitForError()).extensions?.code).toBe('PUBSUB_UNAVAILABLE');

    await redis.restart();
    await waitFor(async () => (await a.readyz()).status === 200 && (await b.readyz()).status === 200, 20_000);
    const written = (await cursor('accountSessions', accountId)) - lastSeq;
    const resumed = watch(s, AccountSessionsDocument, { after: lastSeq });
    const replayed = await resumed.waitForEvents(written);
    const expected = replayed.map(summary);
    expect(expected.map((e) => e[2])).toEqual(expected.map((_, i) => lastSeq + 1 + i));
    expect(expected[0]!.slice(0, 2)).toEqual([before, 'STOPPED']);
    expect(expected.filter((e) => e[0] === during).map((e) => e[1])).toEqual(
      expect.arrayContaining(['PROVISIONING', 'RUNNING', 'STOPPED']),
    );
    expect(expected.filter((e) => e[0] === during).at(-1)![1]).toBe('STOPPED');

    // Live delivery across processes works again.
    const live = await runningSession(a);
    await waitFor(async () =>
      resumed.events.some(
        (e) => e.data.accountSessions.sessionId === live && e.data.accountSessions.status === 'RUNNING',
      ),
    );
    expect(resumed.events.map((e) => e.seq)).toEqual(resumed.events.map((_, i) => lastSeq + 1 + i));
    await stop(a, live);
  });
});
