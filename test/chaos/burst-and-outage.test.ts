// Operator-style faults against two real server processes on a private PostgreSQL: a burst of
// creates far over the limit, then PostgreSQL going away and coming back.
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateSessionDocument } from '../generated/graphql';
import type { PostgresProcess } from '../support/postgres-process';
import { type SpawnedServer, postGraphql } from '../support/spawn-server';
import { waitFor } from '../support/wait';
import { type ChaosFleet, startChaosFleet } from './fleet';

/** Creates in the burst (the bench runs 500; keep the suite quick on two cores). */
const BURST = Number(process.env.CHAOS_BURST ?? 100);
const LIMIT = 25;

/** Sum of a Prometheus sample over the label sets matching any of `labels`, in one scrape per process. */
async function metric(servers: SpawnedServer[], name: string, ...labels: string[]): Promise<number> {
  let sum = 0;
  for (const server of servers) {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      if (labels.length > 0 && !labels.some((l) => line.includes(l))) continue;
      const head = line.slice(0, line.lastIndexOf(' '));
      if (head !== name && !head.startsWith(`${name}{`)) continue;
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

// Generous test timeouts: a shared two-core machine can be many times slower than usual, and pass
// or fail never depends on how long the burst took.
describe('two server processes under a create burst and a PostgreSQL outage', { timeout: 300_000 }, () => {
  let fleet: ChaosFleet;
  let postgres: PostgresProcess;
  let servers: SpawnedServer[] = [];
  let adminToken: string;
  let projectId: string;

  beforeAll(async () => {
    // Admission's transaction limits are backstops in every spawned server (test/support/server-process.ts).
    fleet = await startChaosFleet({ name: 'chaos', limit: LIMIT });
    ({ postgres, servers, adminToken, projectId } = fleet);
  }, 600_000);

  afterAll(async () => {
    await fleet?.stop();
  });

  test(`${BURST} parallel creates over both processes against a limit of ${LIMIT} admit exactly ${LIMIT} and refuse the rest with 429`, async () => {
    const results = await Promise.all(
      Array.from({ length: BURST }, (_, i) =>
        postGraphql(
          servers[i % 2]!.graphqlUrl,
          { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: `burst ${i}` } } },
          adminToken,
        ),
      ),
    );
    const byStatus = new Map<number, number>();
    for (const r of results) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    const unexpected = results.filter((r) => r.status !== 200 && r.status !== 429);
    // A 503 names its dependency only in the servers' log: show those lines beside it.
    const unavailable = servers.flatMap((s) =>
      s
        .output()
        .split('\n')
        .filter((line) => line.includes('dependency unavailable')),
    );
    expect(
      unexpected.map((r) => ({ status: r.status, errors: r.json.errors })),
      unavailable.join('\n'),
    ).toEqual([]);
    // A session that left the live statuses during the burst frees its slot; name any such session.
    const ended = await fleet.sql.query(
      `SELECT status, "stopReason", "failureReason" FROM "Session" WHERE status NOT IN ('PROVISIONING', 'RUNNING')`,
    );
    expect(Object.fromEntries(byStatus), JSON.stringify(ended.rows)).toEqual({
      200: LIMIT,
      429: BURST - LIMIT,
    });
    for (const r of results.filter((x) => x.status === 429)) {
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(r.json.errors?.[0]?.extensions?.code).toBe('CONCURRENT_SESSION_LIMIT');
    }
    for (const r of results.filter((x) => x.status === 200)) {
      expect(r.json.data?.createSession).toMatchObject({ __typename: 'CreateSessionSuccess' });
    }
    // What was stored agrees: exactly LIMIT live sessions, no reservation left behind.
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "Session" WHERE status IN ('PROVISIONING', 'RUNNING')`,
      );
      expect(rows[0]?.n).toBe(LIMIT);
      const all = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"');
      expect(all.rows[0]?.n).toBe(LIMIT);
    } finally {
      await client.end();
    }
    // /metrics agrees: every refusal counted, nothing unexpected, sessions by status.
    expect(await metric(servers, 'singulacomp_admission_refusals_total')).toBe(BURST - LIMIT);
    expect(await metric(servers, 'singulacomp_request_faults_total', 'kind="unexpected"')).toBe(0);
    // One scrape: a session moving from PROVISIONING to RUNNING between two would count twice.
    const live = await metric(
      [servers[0]!],
      'singulacomp_sessions',
      'status="PROVISIONING"',
      'status="RUNNING"',
    );
    expect(live).toBe(LIMIT);
  }, 300_000);

  test('while PostgreSQL is down requests answer 503 SERVICE_UNAVAILABLE with Retry-After, and recover within 5 s of its return', async () => {
    const query = { query: '{ sessions(first: 1) { edges { node { id } } } }' };
    const before = await postGraphql(servers[0]!.graphqlUrl, query, adminToken);
    expect(before.status).toBe(200);

    postgres.stop();
    for (const server of servers) {
      const during = await postGraphql(server.graphqlUrl, query, adminToken);
      expect(during.status).toBe(503);
      expect(during.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(during.json.errors?.[0]?.extensions?.code).toBe('SERVICE_UNAVAILABLE');
      const readyz = await server.readyz();
      expect(readyz.status).toBe(503);
      expect(readyz.body.database).toBe(false);
    }

    expect(
      await metric(servers, 'singulacomp_request_faults_total', 'kind="unavailable"'),
    ).toBeGreaterThanOrEqual(2);

    await postgres.start();
    const back = Date.now();
    for (const server of servers) {
      await waitFor(async () => (await postGraphql(server.graphqlUrl, query, adminToken)).status === 200, {
        timeoutMs: 5_000,
        intervalMs: 50,
      });
    }
    expect(Date.now() - back).toBeLessThan(5_000);
    // Nothing unexpected reached a client, and nothing was logged as one.
    for (const server of servers) expect(server.output()).not.toMatch(/"msg":"unexpected error"/);
  });
});
