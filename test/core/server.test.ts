// The HTTP surface of one server process: health, GraphiQL, CSRF prevention, graceful shutdown and
// the first-start bootstrap admin (R-RUN-1).
import { randomUUID } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';
import { type TestDatabase, createTestDatabase, withClient } from '../support/database';
import { waitFor } from '../support/wait';

/**
 * The server (in this process) has a request once Node hands it to the request listener; Node
 * publishes that moment on a diagnostics channel, matched here by the request's x-test-request
 * header. `received` settles then, and the listener goes.
 */
function requestArrival(): { marker: string; received: Promise<void> } {
  const marker = randomUUID();
  let arrived!: () => void;
  const received = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const onRequestStart = (message: unknown) => {
    if ((message as { request: IncomingMessage }).request.headers['x-test-request'] === marker) arrived();
  };
  subscribe('http.server.request.start', onRequestStart);
  void received.then(() => unsubscribe('http.server.request.start', onRequestStart));
  return { marker, received };
}

describe('health, GraphiQL and CSRF prevention', () => {
  let t: TestApp;
  let production: TestApp;

  beforeAll(async () => {
    [t, production] = await Promise.all([
      startTestApp({ db: 'pglite' }),
      startTestApp({ db: 'pglite', env: { NODE_ENV: 'production' } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([t?.stop(), production?.stop()]);
  });

  test('/healthz answers alive and /readyz reports the database and pub/sub reachable', async () => {
    const health = await fetch(`${t.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ok: true, draining: false, database: true, pubsub: true });
  });

  test('GraphiQL is served in development and off in production', async () => {
    const page = (url: string) => fetch(`${url}/graphql`, { headers: { accept: 'text/html' } });
    const dev = await page(t.url);
    expect(dev.status).toBe(200);
    expect(await dev.text()).toMatch(/graphiql/i);
    const prod = await page(production.url);
    expect(await prod.text()).not.toMatch(/graphiql/i);
    expect(prod.headers.get('content-type') ?? '').not.toMatch(/text\/html/);
  });

  test('a GET query or a text/plain POST without the preflight header is refused', async () => {
    const query = encodeURIComponent('{ viewer { kind } }');
    const auth = { authorization: `Bearer ${t.adminToken}` };
    const get = await fetch(`${t.graphqlUrl}?query=${query}`, { headers: auth });
    expect(get.status).toBe(403);
    expect(await get.text()).not.toContain('PERSONAL_ACCESS');
    const plain = await fetch(t.graphqlUrl, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: JSON.stringify({ query: '{ viewer { kind } }' }),
    });
    expect(plain.status).toBe(403);
    expect(await plain.text()).not.toContain('PERSONAL_ACCESS');
    // With the preflight header the same GET is answered: the refusal above is CSRF prevention.
    const allowed = await fetch(`${t.graphqlUrl}?query=${query}`, {
      headers: { ...auth, 'x-graphql-yoga-csrf': '1' },
    });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toEqual({ data: { viewer: { kind: 'PERSONAL_ACCESS' } } });
  });

  test('a mutation over GET is refused even with the preflight header', async () => {
    const query = encodeURIComponent(
      'mutation { updateAccount(input: { concurrentSessionLimit: 1 }) { __typename } }',
    );
    const res = await fetch(`${t.graphqlUrl}?query=${query}`, {
      headers: { authorization: `Bearer ${t.adminToken}`, 'x-graphql-yoga-csrf': '1' },
    });
    expect(res.status).toBe(405);
    const account = await t.app.services.db.account.findFirstOrThrow();
    expect(account.concurrentSessionLimit).toBeNull();
  });
});

describe('graceful shutdown', () => {
  test('a request in flight when stop() begins still gets its answer', async () => {
    const t = await startTestApp({ db: 'pglite' });
    try {
      const url = new URL(t.graphqlUrl);
      const body = JSON.stringify({ query: '{ viewer { kind } }' });
      const half = Math.floor(body.length / 2);
      let headersSent!: () => void;
      const sent = new Promise<void>((resolve) => {
        headersSent = resolve;
      });
      let beginStop!: () => void;
      const stopping = new Promise<void>((resolve) => {
        beginStop = resolve;
      });
      const { marker, received } = requestArrival();
      const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
              authorization: `Bearer ${t.adminToken}`,
              'x-test-request': marker,
            },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => {
              text += c.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, half), () => headersSent());
        // The rest of the body follows only after shutdown has begun.
        void stopping.then(() => setTimeout(() => req.end(body.slice(half)), 200));
      });
      await sent;
      await received;
      const stopped = t.app.stop();
      beginStop();
      const answer = await response;
      await stopped;
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.text)).toEqual({ data: { viewer: { kind: 'PERSONAL_ACCESS' } } });
      // New connections are no longer accepted.
      await expect(fetch(`${t.url}/healthz`)).rejects.toThrow();
    } finally {
      rmSync(t.dataDir, { recursive: true, force: true });
    }
  });
  test('while draining, the request in flight closes its connection after its answer and a request that arrives gets 503 with Retry-After', async () => {
    const t = await startTestApp({ db: 'pglite' });
    try {
      const { port } = new URL(t.url);
      const body = JSON.stringify({ query: '{ viewer { kind } }' });
      const { marker, received } = requestArrival();
      const raw = () => {
        const socket = connect(Number(port), '127.0.0.1');
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(text)));
        socket.on('error', () => {});
        return { socket, closed };
      };
      const head = (extra: string) =>
        `POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer ${t.adminToken}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}`;
      // In flight: its headers are in, half its body. Late: only part of its headers.
      const inFlight = raw();
      inFlight.socket.write(`${head(`x-test-request: ${marker}\r\n`)}\r\n${body.slice(0, 10)}`);
      await received;
      const late = raw();
      late.socket.write(head(''));
      await waitFor(() => late.socket.bytesWritten > 0 && late.socket.writableLength === 0);
      const stopped = t.app.stop();
      late.socket.write(`\r\n${body}`);
      const lateAnswer = await late.closed;
      inFlight.socket.write(body.slice(10));
      const inFlightAnswer = await inFlight.closed;
      await stopped;
      expect(lateAnswer).toMatch(/^HTTP\/1\.1 503 /);
      expect(lateAnswer).toMatch(/\r\nretry-after: 1\r\n/i);
      expect(lateAnswer).toContain('"code":"UNAVAILABLE"');
      expect(inFlightAnswer).toMatch(/^HTTP\/1\.1 200 /);
      expect(inFlightAnswer).toMatch(/\r\nconnection: close\r\n/i);
      expect(inFlightAnswer).toContain('"kind":"PERSONAL_ACCESS"');
    } finally {
      rmSync(t.dataDir, { recursive: true, force: true });
    }
  });
});

describe('first start', () => {
  test('writes <dataDir>/bootstrap-token with mode 0600 and a second start creates no other admin', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sc-boot-'));
    try {
      const first = await startTestApp({ db: 'pglite', dataDir });
      const file = join(dataDir, 'bootstrap-token');
      expect(first.app.bootstrapToken).toMatch(/^singulacomp_pat_/);
      expect(readFileSync(file, 'utf8').trim()).toBe(first.app.bootstrapToken);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const admin = await first.app.services.db.user.findMany();
      expect(admin).toMatchObject([{ email: 'admin@localhost', role: 'ADMIN' }]);
      const account = await first.app.services.db.account.findUniqueOrThrow({
        where: { id: admin[0]!.accountId },
      });
      expect(account.tier).toBe('TEAM');
      await first.stop();

      const second = await startTestApp({ db: 'pglite', dataDir });
      try {
        expect(second.app.bootstrapToken).toBeNull();
        expect(await second.app.services.db.user.count()).toBe(1);
        expect(await second.app.services.db.account.count()).toBe(1);
        expect(await second.app.services.db.token.count({ where: { name: 'bootstrap' } })).toBe(1);
        // The token from the first start still works after the restart (same embedded database).
        const res = await second.raw({ query: '{ viewer { kind } }' }, first.adminToken);
        expect(res.data).toEqual({ viewer: { kind: 'PERSONAL_ACCESS' } });
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  // A fault outside the server: the database refuses the first `failures` inserts of a token. A
  // sequence counts the attempts, since it is not rolled back with the failed transaction.
  async function databaseRefusingTokens(
    failures: number,
  ): Promise<TestDatabase & { attempts(): Promise<number> }> {
    const database = await createTestDatabase();
    await withClient(
      (client) =>
        client.query(`
        CREATE SEQUENCE token_insert_attempts;
        CREATE FUNCTION refuse_token() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF nextval('token_insert_attempts') <= ${failures} THEN RAISE EXCEPTION 'refused by the test'; END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_token BEFORE INSERT ON "Token" FOR EACH ROW EXECUTE FUNCTION refuse_token();`),
      database.url,
    );
    const attempts = () =>
      withClient(async (client) => {
        const { rows } = await client.query('SELECT last_value, is_called FROM token_insert_attempts');
        return rows[0].is_called ? Number(rows[0].last_value) : 0;
      }, database.url);
    return { ...database, attempts };
  }

  test('a database error while creating the admin is retried and never leaves an admin without its token', async () => {
    const database = await databaseRefusingTokens(1);
    try {
      const t = await startTestApp({ databaseUrl: database.url });
      try {
        expect(await database.attempts()).toBe(2);
        expect(t.app.bootstrapToken).toMatch(/^singulacomp_pat_/);
        expect(readFileSync(join(t.dataDir, 'bootstrap-token'), 'utf8').trim()).toBe(t.app.bootstrapToken);
        const db = t.app.services.db;
        expect(await db.user.findMany({ select: { email: true } })).toEqual([{ email: 'admin@localhost' }]);
        expect(await db.account.count()).toBe(1);
        expect(await db.token.count()).toBe(1);
        const res = await t.raw({ query: '{ viewer { kind } }' }, t.app.bootstrapToken);
        expect(res.data).toEqual({ viewer: { kind: 'PERSONAL_ACCESS' } });
      } finally {
        await t.stop();
        rmSync(t.dataDir, { recursive: true, force: true });
      }
    } finally {
      await database.drop();
    }
  });

  test('a database that keeps failing fails the start with a clear error and creates nothing', async () => {
    const database = await databaseRefusingTokens(Number.MAX_SAFE_INTEGER);
    const dataDir = mkdtempSync(join(tmpdir(), 'sc-boot-'));
    try {
      await expect(startTestApp({ databaseUrl: database.url, dataDir })).rejects.toThrow(
        'The bootstrap admin could not be created.',
      );
      expect(await database.attempts()).toBe(5);
      expect(existsSync(join(dataDir, 'bootstrap-token'))).toBe(false);
      const counts = await withClient(async (client) => {
        const { rows } = await client.query(
          'SELECT (SELECT count(*) FROM "User")::int AS users, (SELECT count(*) FROM "Account")::int AS accounts',
        );
        return rows[0];
      }, database.url);
      expect(counts).toEqual({ users: 0, accounts: 0 });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await database.drop();
    }
  });
});
