// Two real server processes sharing one PostgreSQL: start-up migrations and the bootstrap admin
// happen once across the fleet, and session admission is race-free across processes (R-SES-2).
import { print } from 'graphql';
import { createClient } from 'graphql-ws';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { readMigrations } from '../../server/migrate';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  StopSessionDocument,
  UpdateAccountDocument,
} from '../generated/graphql';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { createTestRepo } from '../support/git';
import { type SpawnedServer, postGraphql, spawnServers } from '../support/spawn-server';

describe('admission across two server processes sharing one PostgreSQL', () => {
  let database: TestDatabase;
  let sql: pg.Client;
  let servers: SpawnedServer[] = [];
  let adminToken: string;
  let projectId: string;
  const repo = createTestRepo({ 'README.md': '# fleet\n' });

  beforeAll(async () => {
    database = await createTestDatabase();
    // Both processes start against the empty database at the same time.
    servers = await spawnServers([{ databaseUrl: database.url }, { databaseUrl: database.url }]);
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
    await Promise.all(servers.map((s) => s.stop()));
    await database?.drop();
  });

  test('two servers starting at once apply each migration exactly once', async () => {
    const files = await readMigrations();
    const { rows } = await sql.query<{ migration_name: string; finished_at: Date | null }>(
      'SELECT migration_name, finished_at FROM "_prisma_migrations" ORDER BY migration_name',
    );
    expect(rows.map((r) => r.migration_name)).toEqual(files.map((f) => f.name));
    expect(rows.every((r) => r.finished_at !== null)).toBe(true);
  });

  test('exactly one of the two servers creates the bootstrap admin', async () => {
    const tokens = servers.map((s) => s.bootstrapToken()).filter((t): t is string => t !== null);
    expect(tokens).toHaveLength(1);
    adminToken = tokens[0]!;
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM "User"');
    expect(rows[0]?.n).toBe(1);
    const accounts = await sql.query<{ tier: string }>('SELECT tier FROM "Account"');
    expect(accounts.rows).toEqual([{ tier: 'TEAM' }]);
  });

  test('40 parallel createSession calls over both servers against a limit of 10 admit exactly 10', async () => {
    const [a, b] = servers as [SpawnedServer, SpawnedServer];
    const limited = await postGraphql(
      a.graphqlUrl,
      { query: print(UpdateAccountDocument), variables: { input: { concurrentSessionLimit: 10 } } },
      adminToken,
    );
    expect(limited.json.data?.updateAccount).toMatchObject({
      __typename: 'UpdateAccountSuccess',
      account: { concurrentSessionLimit: 10 },
    });
    const created = await postGraphql(
      b.graphqlUrl,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'fleet', repositoryUrl: repo.url } },
      },
      adminToken,
    );
    const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
    if (!project?.project) throw new Error(JSON.stringify(created.json));
    projectId = project.project.id;
    const base = repo.head();

    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        postGraphql(
          (i % 2 === 0 ? a : b).graphqlUrl,
          { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: `job ${i}` } } },
          adminToken,
        ),
      ),
    );

    const admitted = results.filter(
      (r) =>
        (r.json.data?.createSession as { __typename?: string } | undefined)?.__typename ===
        'CreateSessionSuccess',
    );
    const refused = results.filter((r) => r.status === 429);
    // Every answer is one of the two: an internal error here once passed for an admission.
    const neither = results.filter((r) => !admitted.includes(r) && !refused.includes(r));
    expect(neither.map((r) => [r.status, r.json.errors])).toEqual([]);
    expect(admitted).toHaveLength(10);
    expect(refused).toHaveLength(30);
    for (const r of refused) {
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(r.json.data ?? null).toBeNull();
      expect(r.json.errors?.[0]?.extensions).toMatchObject({
        code: 'CONCURRENT_SESSION_LIMIT',
        limit: 10,
        count: 10,
      });
    }
    // Both processes admitted and refused: the race really crossed process boundaries.
    const servedBy = (r: (typeof results)[number]) => results.indexOf(r) % 2;
    expect(new Set(refused.map(servedBy)).size).toBe(2);

    const sessionIds = admitted.map((r) => {
      const payload = r.json.data?.createSession as {
        __typename: string;
        session?: { sessionId: string; baseCommit: string };
      };
      expect(payload.__typename).toBe('CreateSessionSuccess');
      return payload.session!.sessionId;
    });
    const branches = repo.branches();
    for (const id of sessionIds) expect(branches[id]).toBe(base);
    // Refused calls cut no branch and wrote no row.
    expect(Object.keys(branches).sort()).toEqual(['main', ...sessionIds].sort());
    const stored = await sql.query<{ status: string; n: number }>(
      'SELECT status::text, count(*)::int AS n FROM "Session" GROUP BY status',
    );
    expect(stored.rows.reduce((sum, r) => sum + r.n, 0)).toBe(10);
    expect(stored.rows.every((r) => r.status === 'PROVISIONING' || r.status === 'RUNNING')).toBe(true);
  });

  test('over WebSocket the refusal carries the same CONCURRENT_SESSION_LIMIT code', async () => {
    const client = createClient({
      url: servers[1]!.graphqlUrl.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: adminToken },
      retryAttempts: 0,
    });
    try {
      const result = await new Promise<{ errors?: ReadonlyArray<{ extensions?: Record<string, unknown> }> }>(
        (resolve, reject) => {
          let last: { errors?: ReadonlyArray<{ extensions?: Record<string, unknown> }> } = {};
          client.subscribe(
            { query: print(CreateSessionDocument), variables: { input: { projectId } } },
            {
              next: (value) => {
                last = value as typeof last;
              },
              error: (error) => {
                if (Array.isArray(error)) resolve({ errors: error });
                else reject(error);
              },
              complete: () => resolve(last),
            },
          );
        },
      );
      expect(result.errors?.[0]?.extensions).toMatchObject({
        code: 'CONCURRENT_SESSION_LIMIT',
        limit: 10,
        count: 10,
      });
    } finally {
      await client.dispose();
    }
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"');
    expect(rows[0]?.n).toBe(10);
  });

  test('stopping a session frees a slot for the next create on the other server', async () => {
    const { rows } = await sql.query<{ id: string }>('SELECT id FROM "Session" ORDER BY "createdAt" LIMIT 1');
    const stopped = await postGraphql(
      servers[0]!.graphqlUrl,
      { query: print(StopSessionDocument), variables: { input: { sessionId: rows[0]!.id } } },
      adminToken,
    );
    expect(stopped.json.data?.stopSession).toMatchObject({ session: { status: 'STOPPED' } });
    const next = await postGraphql(
      servers[1]!.graphqlUrl,
      { query: print(CreateSessionDocument), variables: { input: { projectId } } },
      adminToken,
    );
    expect(next.status).toBe(200);
    expect(next.json.data?.createSession).toMatchObject({ __typename: 'CreateSessionSuccess' });

    // Stop everything so no sandbox outlives the test.
    const live = await sql.query<{ id: string }>(
      `SELECT id FROM "Session" WHERE status IN ('PROVISIONING','RUNNING')`,
    );
    for (const s of live.rows) {
      await postGraphql(
        servers[0]!.graphqlUrl,
        { query: print(StopSessionDocument), variables: { input: { sessionId: s.id } } },
        adminToken,
      );
    }
    const after = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Session" WHERE status IN ('PROVISIONING','RUNNING')`,
    );
    expect(after.rows[0]?.n).toBe(0);
  });
});
