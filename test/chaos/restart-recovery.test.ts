// A server process killed with SIGKILL while it admits and provisions sessions, then started again
// on the same data directory, with the recovery sweep and pg-boss's heartbeat both too slow to
// matter: every admitted session has its provisioning job from the moment it exists, and the
// restarted process takes the dead one's jobs over and runs them. Then PostgreSQL itself stops
// and starts again: queries answer again, and a create provisions as before.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument, CreateSessionDocument, UpdateAccountDocument } from '../generated/graphql';
import { type TestRepo, createTestRepo } from '../support/git';
import { type PostgresProcess, startPostgresProcess } from '../support/postgres-process';
import { type SpawnedServer, killLocalSandboxes, postGraphql, spawnServer } from '../support/spawn-server';
import { waitFor } from '../support/wait';
import { processesWith } from './fleet';

const SESSIONS = 6;
const HOUR_MS = '3600000';

describe('a server killed mid-provisioning and started again', { timeout: 300_000 }, () => {
  let postgres: PostgresProcess;
  let repo: TestRepo;
  let dataDir: string;
  let sql: pg.Pool;
  let server: SpawnedServer;
  let token: string;
  let projectId: string;
  const marker = `sleep ${1500 + Math.floor(Math.random() * 900)}`;
  const spawn = () =>
    spawnServer({
      databaseUrl: postgres.url,
      dataDir,
      startTimeoutMs: 180_000,
      env: {
        SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`,
        SINGULACOMP_LOCAL_ISOLATION: 'none',
        // Neither the sweep (and the held job's own backstop) nor pg-boss's heartbeat comes round
        // within the test: only the takeover of a dead process's jobs can resume its sessions.
        SINGULACOMP_RECOVERY_INTERVAL_MS: HOUR_MS,
        SINGULACOMP_PROVISIONING_RESUME_MS: HOUR_MS,
        SINGULACOMP_JOB_HEARTBEAT_SECONDS: '3600',
      },
    });
  const post = <T, V>(doc: TypedDocumentNode<T, V>, variables: V) =>
    postGraphql(server.graphqlUrl, { query: print(doc), variables }, token);
  const byStatus = async (prefix: string) => {
    const { rows } = await sql.query<{ status: string; n: number }>(
      `SELECT status::text, count(*)::int AS n FROM "Session" WHERE prompt LIKE $1 GROUP BY status`,
      [`${prefix}%`],
    );
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  };

  beforeAll(async () => {
    postgres = await startPostgresProcess();
    repo = createTestRepo({ 'README.md': '# restart\n' });
    dataDir = mkdtempSync(join(tmpdir(), 'sc-restart-'));
    sql = new pg.Pool({ connectionString: postgres.url, max: 2 });
    // PostgreSQL's outage is part of the test: a dropped connection must not crash the run.
    sql.on('error', () => {});
    server = await spawn();
    token = server.bootstrapToken()!;
    const limited = await post(UpdateAccountDocument, { input: { concurrentSessionLimit: 4 * SESSIONS } });
    expect(limited.json.errors).toBeUndefined();
    const created = await post(CreateProjectDocument, {
      input: { name: 'restart', repositoryUrl: repo.url },
    });
    const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
    projectId = project!.project!.id;
  }, 600_000);

  afterAll(async () => {
    await sql?.end().catch(() => {});
    await server?.stop();
    if (dataDir) killLocalSandboxes(dataDir);
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    postgres?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    repo?.remove();
  });

  test('every session it admitted has a job at once, and the restarted process provisions them all', async () => {
    const creates = Array.from({ length: SESSIONS }, (_, i) =>
      post(CreateSessionDocument, { input: { projectId, prompt: `crash ${i}` } }).catch(() => null),
    );
    // Killed as soon as every create is admitted: branch cuts, hand-offs and provisioning are cut off.
    await waitFor(
      async () => {
        const counts = await byStatus('crash');
        return Object.values(counts).reduce((a, b) => a + b, 0) === SESSIONS;
      },
      { timeoutMs: 60_000, intervalMs: 5 },
    );
    server.process.kill('SIGKILL');
    await Promise.all(creates);

    // No reservation without a job: each session still PROVISIONING has a provisioning job that
    // will run (queued, held for its creator, running or to be retried).
    const { rows: uncovered } = await sql.query<{ id: string }>(
      `SELECT s.id::text FROM "Session" s WHERE s.prompt LIKE 'crash %' AND s.status = 'PROVISIONING'
         AND NOT EXISTS (SELECT 1 FROM pgboss.job j WHERE j.name = 'session-provision'
           AND j.singleton_key = s.id::text AND j.state IN ('created', 'retry', 'active'))`,
    );
    expect(uncovered).toEqual([]);
    const left = (await byStatus('crash')).PROVISIONING ?? 0;

    server = await spawn();
    const settled = await waitFor(
      async () => {
        const counts = await byStatus('crash');
        return counts.PROVISIONING ? null : counts;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(settled).toEqual({ RUNNING: SESSIONS });
    // Each session's newest provisioning job completed; none is left to run again.
    const jobs = await waitFor(
      async () => {
        const { rows } = await sql.query<{ state: string; n: number }>(
          `SELECT j.state::text, count(*)::int AS n FROM "Session" s
             JOIN LATERAL (SELECT state FROM pgboss.job WHERE name = 'session-provision'
               AND singleton_key = s.id::text ORDER BY created_on DESC LIMIT 1) j ON true
           WHERE s.prompt LIKE 'crash %' GROUP BY j.state`,
        );
        const states = Object.fromEntries(rows.map((r) => [r.state, r.n]));
        return states.completed === SESSIONS ? states : null;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(jobs).toEqual({ completed: SESSIONS });
    // The takeover did it, not the sweep.
    if (left > 0) expect(server.output()).toMatch(/took over the jobs of a stopped process/);
    expect(server.output()).not.toMatch(/resumed interrupted provisioning/);
  });

  test('after PostgreSQL stops and starts again, queries answer and a create provisions', async () => {
    const query = { query: '{ sessions(first: 1) { edges { node { id } } } }' };
    postgres.stop();
    const during = await postGraphql(server.graphqlUrl, query, token);
    expect(during.status).toBe(503);
    await postgres.start();
    await waitFor(async () => (await postGraphql(server.graphqlUrl, query, token)).status === 200, {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const created = await post(CreateSessionDocument, { input: { projectId, prompt: 'after outage' } });
    expect(created.json.data?.createSession).toMatchObject({ __typename: 'CreateSessionSuccess' });
    expect(await waitFor(async () => (await byStatus('after outage')).RUNNING, { timeoutMs: 60_000 })).toBe(
      1,
    );
  });
});
