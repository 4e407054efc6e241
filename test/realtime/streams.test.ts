// One in-process server per database engine: the event log's numbering, publish-after-commit,
// back-pressure, and the WebSocket limits (init timeout, per-token connections, token expiry).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import pino from 'pino';
import WebSocket from 'ws';
import { SCOPES, type UserPrincipal } from '../../resolvers/auth/principal';
import { type App, buildApp } from '../../server/app';
import { parseEnv } from '../../server/env';
import type { Envelope } from '../../resolvers/events/channels';
import { AccountSessionsDocument, TelemetryDocument } from '../generated/graphql';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { streamStarted, waitFor } from '../support/wait';
import { openSocket, watch } from './helpers';

for (const engine of ['postgres', 'pglite'] as const) {
  describe(`realtime streams on ${engine}`, () => {
    let app: App;
    let database: TestDatabase | null = null;
    const dataDir = mkdtempSync(join(tmpdir(), 'sc-rt-'));
    let wsUrl: string;
    let accountId: string;
    let userId: string;
    let sandbox: { id: string; sessionId: string };
    let projectId: string;
    /** The server's log lines at warn and above, parsed. */
    const logged: Array<Record<string, unknown>> = [];

    async function token(expiresAt: Date | null = null): Promise<string> {
      const principal: UserPrincipal = {
        kind: 'USER',
        userId,
        accountId,
        isAdmin: true,
        scopes: new Set(SCOPES),
        tokenId: '',
        expiresAt: null,
      };
      const { secret } = await app.services.tokens.createPersonalAccessToken(principal, {
        name: 'rt',
        scopes: ['sessions:read'],
        expiresAt,
      });
      return secret;
    }

    /** A RUNNING session of the test project with a STARTED LOCAL sandbox (rows only). */
    async function runningSandbox(branchName: string): Promise<{ id: string; sessionId: string }> {
      const session = await app.services.db.session.create({
        data: { accountId, projectId, status: 'RUNNING', branchName, baseRef: 'main' },
      });
      return app.services.db.sandbox.create({
        data: {
          sessionId: session.id,
          accountId,
          provider: 'LOCAL',
          status: 'STARTED',
          cpu: 2,
          memoryGiB: 4,
          diskGiB: 20,
        },
      });
    }

    beforeAll(async () => {
      database = engine === 'postgres' ? await createTestDatabase() : null;
      app = await buildApp({
        env: parseEnv({
          NODE_ENV: 'test',
          PORT: '0',
          HOST: '127.0.0.1',
          LOG_LEVEL: 'silent',
          SINGULACOMP_DATA_DIR: dataDir,
          SINGULACOMP_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
          ...(database ? { DATABASE_URL: database.url } : {}),
        }),
        realtime: { connectionInitWaitTimeoutMs: 500, maxConnectionsPerToken: 2 },
        logger: pino({ level: 'warn' }, { write: (line: string) => logged.push(JSON.parse(line)) }),
      });
      await app.start();
      wsUrl = `${app.url.replace(/^http/, 'ws')}/graphql`;
      const db = app.services.db;
      const account = await db.account.create({ data: { name: 'rt', tier: 'TEAM' } });
      accountId = account.id;
      userId = (
        await db.user.create({ data: { accountId, email: `${accountId}@x.test`, name: 'rt', role: 'ADMIN' } })
      ).id;
      projectId = (await db.project.create({ data: { accountId, name: 'rt', repositoryUrl: '/dev/null' } }))
        .id;
      sandbox = await runningSandbox('b');
    });

    afterAll(async () => {
      await app?.stop();
      await database?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('concurrent publishes on several keys get gap-free per-key seqs, stored in the log', async () => {
      const keys = ['k1', 'k2', 'k3'].map((k) => `${sandbox.id.slice(0, 30)}${k}`);
      const seqs = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          app.services.pubsub.publish('reloadProgress', keys[i % 3]!, {
            reloadId: keys[i % 3]!,
            sessionId: sandbox.sessionId,
            accountId,
            phase: String(i),
          }),
        ),
      );
      for (let k = 0; k < 3; k++) {
        const mine = seqs.filter((_, i) => i % 3 === k);
        expect(mine).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
        const stored = await app.services.database.raw.query<{ seq: number; payload: { phase: string } }>(
          'SELECT "seq", "payload" FROM "RealtimeEvent" WHERE "topic" = $1 AND "key" = $2 ORDER BY "seq"',
          ['reloadProgress', keys[k]],
        );
        expect(stored.map((r) => [Number(r.seq), r.payload.phase])).toEqual(
          mine.map((seq, i) => [seq, String(i * 3 + k)]),
        );
      }
    });

    test('events emitted in a transaction that rolls back are neither stored nor delivered; a commit delivers them after it', async () => {
      const stream = app.services.pubsub.subscribe('sandboxUpdated', sandbox.id, { after: 0 });
      const received: Envelope<'sandboxUpdated'>[] = [];
      const reading = (async () => {
        for await (const e of stream) received.push(e);
      })();
      const payload = { sandboxId: sandbox.id, sessionId: sandbox.sessionId, accountId, status: 'STOPPING' };
      await expect(
        app.services.events.transaction(app.services.db, async (tx, emit) => {
          await tx.sandbox.update({ where: { id: sandbox.id }, data: { status: 'STOPPING' } });
          await emit('sandboxUpdated', sandbox.id, payload);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      const seq = await app.services.events.transaction(app.services.db, async (tx, emit) => {
        await tx.sandbox.update({ where: { id: sandbox.id }, data: { status: 'STOPPED' } });
        const s = await emit('sandboxUpdated', sandbox.id, { ...payload, status: 'STOPPED' });
        expect(received).toEqual([]);
        return s;
      });
      await waitFor(async () => received.length > 0);
      await stream.return?.();
      await reading;
      expect(seq).toBe(1);
      expect(received.map((e) => [e.seq, e.payload.status])).toEqual([[1, 'STOPPED']]);
      const stored = await app.services.db.sandbox.findUniqueOrThrow({ where: { id: sandbox.id } });
      expect(stored.status).toBe('STOPPED');
    });

    test('a slow reader gets telemetry coalesced to the newest sample, while status events overflow into a close with the last delivered seq', async () => {
      const telemetry = app.services.pubsub.subscribe('telemetry', sandbox.id, {
        coalesce: true,
        maxBuffered: 5,
      });
      for (let i = 0; i < 50; i++) {
        await app.services.events.telemetry({
          sandboxId: sandbox.id,
          sessionId: sandbox.sessionId,
          accountId,
          sampleId: String(i),
        });
      }
      const newest = await telemetry.next();
      expect(newest.value.payload.sampleId).toBe('49');
      const waiting = telemetry.next();
      await app.services.events.telemetry({
        sandboxId: sandbox.id,
        sessionId: sandbox.sessionId,
        accountId,
        sampleId: '50',
      });
      expect((await waiting).value.payload.sampleId).toBe('50');
      await telemetry.return?.();

      let overflowAt: number | null = null;
      const status = app.services.pubsub.subscribe('sandboxUpdated', sandbox.id, {
        maxBuffered: 5,
        observer: {
          delivered: () => {},
          overflow: (seq) => {
            overflowAt = seq;
          },
        },
      });
      // A live-only stream: events published before it takes its starting point are not its own.
      await streamStarted(status);
      for (let i = 0; i < 7; i++) {
        await app.services.events.sandbox(
          { id: sandbox.id, sessionId: sandbox.sessionId, status: 'STARTED' },
          accountId,
        );
      }
      expect(overflowAt).toBe(1);
      // What was buffered is not lost silently: the consumer sees the stream end and resumes from seq 1.
      const drained: number[] = [];
      for await (const e of status) drained.push(e.seq);
      expect(drained).toEqual([]);
      const resumed = app.services.pubsub.subscribe('sandboxUpdated', sandbox.id, { after: overflowAt });
      const replay: number[] = [];
      for (let i = 0; i < 7; i++) replay.push((await resumed.next()).value.seq);
      await resumed.return?.();
      expect(replay).toEqual([2, 3, 4, 5, 6, 7, 8]);
    });

    test('an unexpected error while resolving one event reaches the client masked and logged, and the stream goes on', async () => {
      const own = await runningSandbox('m');
      // No sample in the event and no stored sample with its id: the field's database read throws
      // Prisma's not-found error, which is no GraphQLError of ours.
      const missingSampleId = '987654321';
      await app.services.events.telemetry({
        sandboxId: own.id,
        sessionId: own.sessionId,
        accountId,
        sampleId: missingSampleId,
      });
      const at = new Date().toISOString();
      await app.services.events.telemetry({
        sandboxId: own.id,
        sessionId: own.sessionId,
        accountId,
        sampleId: '1',
        sample: {
          at,
          memoryUsedBytes: 123,
          memoryLimitBytes: 456,
          load1: 0.5,
          diskUsedBytes: 1,
          diskTotalBytes: 2,
          daemonRssBytes: 3,
          opencodeRssBytes: 4,
          reason: 'INTERVAL',
        },
      });
      const socket = openSocket(wsUrl, await token());
      try {
        const w = watch(socket, TelemetryDocument, { sandboxId: own.id, after: 0 });
        const [event] = await w.waitForEvents(1);
        expect(event).toEqual({
          data: { telemetry: { at, memoryUsedBytes: 123, load1: 0.5, reason: 'INTERVAL' } },
          seq: 2,
        });
        expect(w.errors).toHaveLength(1);
        const error = w.errors[0]!;
        expect(error.message).toBe('Unexpected error.');
        expect(error.extensions).toMatchObject({ code: 'INTERNAL_SERVER_ERROR' });
        expect(JSON.stringify(error)).not.toMatch(/prisma|record|not found|987654321/i);
        const line = await waitFor(
          async () =>
            logged.find((l) => l.msg === 'unexpected error' && JSON.stringify(l.err).includes('No record')),
          10_000,
          'the unexpected error in the log',
        );
        expect(line).toMatchObject({ module: 'errors', path: ['telemetry'] });
        expect(w.completed).toBe(false);
      } finally {
        await socket.dispose();
      }
    });

    test('a connection that never sends connection_init is closed with 4408', async () => {
      const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
      const code = await new Promise<number>((resolve) => socket.once('close', (c) => resolve(c)));
      expect(code).toBe(4408);
    });

    test('a token may hold only its connection limit of sockets; the next is closed with 4429', async () => {
      const secret = await token();
      const first = openSocket(wsUrl, secret);
      const second = openSocket(wsUrl, secret);
      await waitFor(async () => first.connected && second.connected);
      const third = openSocket(wsUrl, secret);
      await waitFor(async () => third.closes.length > 0);
      expect(third.closes).toEqual([4429]);
      expect(first.closes).toEqual([]);
      await Promise.all([first.dispose(), second.dispose(), third.dispose()]);
    });

    test('a socket whose token expires is closed with 4401', async () => {
      const secret = await token(new Date(Date.now() + 1_500));
      const socket = openSocket(wsUrl, secret);
      const w = watch(socket, AccountSessionsDocument, {});
      await waitFor(async () => socket.connected);
      await waitFor(async () => socket.closes.length > 0, 10_000);
      expect(socket.closes).toEqual([4401]);
      expect(w.events).toEqual([]);
      await socket.dispose();
    });
  });
}
