// PostgreSQL refusing new connections for too many clients (SQLSTATE 53300: max_connections, or a
// role's limit as here). Requests wait for one of the pool's own connections instead of failing, and
// a database that stays full answers 503 SERVICE_UNAVAILABLE, not an internal error.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';
import { type TestDatabase, createTestDatabase, withClient } from '../support/database';
import { WAIT_SCALE, waitFor } from '../support/wait';

const PARALLEL = 40;
const PROJECTS = '{ viewer { projects(first: 5) { edges { node { id } } } } }';
const NO_PROJECTS = { viewer: { projects: { edges: [] } } };

interface Limited {
  app: TestApp;
  database: TestDatabase;
  role: string;
  setLimit(limit: number): Promise<void>;
}

/** A server on a database of its own, connecting as a role limited to `limit` connections (superusers ignore limits). */
async function startLimited(limit: number, connectTimeoutMs: number): Promise<Limited> {
  const database = await createTestDatabase();
  const role = `sc_limited_${randomBytes(4).toString('hex')}`;
  await withClient(async (client) => {
    await client.query(`CREATE ROLE "${role}" LOGIN CONNECTION LIMIT ${limit}`);
    await client.query(`GRANT ALL ON DATABASE "${database.name}" TO "${role}"`);
    await client.query(`GRANT ALL ON SCHEMA public TO "${role}"`);
    await client.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO "${role}"`);
    await client.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "${role}"`);
  }, database.url);
  const url = new URL(database.url);
  url.username = role;
  const dropRole = () => withClient((client) => client.query(`DROP ROLE IF EXISTS "${role}"`));
  const app = await startTestApp({
    databaseUrl: url.toString(),
    env: { SINGULACOMP_DB_POOL_SIZE: '20', SINGULACOMP_DB_CONNECT_TIMEOUT_MS: String(connectTimeoutMs) },
  }).catch(async (error: unknown) => {
    await database.drop();
    await dropRole();
    throw error;
  });
  return {
    app,
    database,
    role,
    async setLimit(n) {
      await withClient((client) => client.query(`ALTER ROLE "${role}" CONNECTION LIMIT ${n}`));
    },
  };
}

async function stopLimited(limited: Limited | undefined): Promise<void> {
  if (!limited) return;
  await limited.app.stop();
  rmSync(limited.app.dataDir, { recursive: true, force: true });
  await limited.database.drop();
  await withClient((client) => client.query(`DROP ROLE IF EXISTS "${limited.role}"`));
}

describe('PostgreSQL refusing connections for too many clients', () => {
  let patient: Limited;
  let hurried: Limited;

  beforeAll(async () => {
    const started = await Promise.allSettled([startLimited(3, 20_000 * WAIT_SCALE), startLimited(10, 1_000)]);
    // What started is stopped in afterAll, even when the other did not.
    [patient, hurried] = started.map((r) => (r.status === 'fulfilled' ? r.value : undefined)) as [
      Limited,
      Limited,
    ];
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });

  afterAll(async () => {
    await Promise.all([stopLimited(patient), stopLimited(hurried)]);
  });

  test(`${PARALLEL} parallel requests through a pool of 20 against a limit of 3 connections are all answered`, async () => {
    const results = await Promise.all(
      Array.from({ length: PARALLEL }, () => patient.app.raw({ query: PROJECTS })),
    );
    expect(results.filter((r) => r.status !== 200 || r.errors).map((r) => [r.status, r.errors])).toEqual([]);
    expect(results.map((r) => r.data)).toEqual(Array.from({ length: PARALLEL }, () => NO_PROJECTS));
  });

  test('a database that stays full answers 503 SERVICE_UNAVAILABLE with Retry-After, and recovers when it has room', async () => {
    await hurried.setLimit(0);
    // Its open connections go too, so every request needs a new one.
    await withClient((client) =>
      client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [
        hurried.role,
      ]),
    );
    const refused = await hurried.app.raw({ query: PROJECTS });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });

    await hurried.setLimit(10);
    const answered = await waitFor(async () => {
      const res = await hurried.app.raw({ query: PROJECTS });
      return res.status === 200 ? res : null;
    });
    expect(answered.errors).toBeUndefined();
    expect(answered.data).toEqual(NO_PROJECTS);
  });
});
