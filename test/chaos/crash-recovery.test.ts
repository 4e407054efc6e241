// kill -9 of a server process in the middle of a create burst and of provisioning: the surviving
// process resumes or fails every interrupted session from its durable job (or the recovery sweep),
// so within 60 s no session is PROVISIONING, no limit slot is held by a dead attempt, and no
// sandbox process of a finished session is left running.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument, CreateSessionDocument, UpdateAccountDocument } from '../generated/graphql';
import { createTestRepo } from '../support/git';
import { type PostgresProcess, startPostgresProcess } from '../support/postgres-process';
import { type SpawnedServer, killLocalSandboxes, postGraphql, spawnServer } from '../support/spawn-server';
import { waitFor } from '../support/wait';

const LIMIT = 8;
const BURST = 24;

/** Pids of processes whose command line mentions marker (the LOCAL sandboxes' entry command). */
function processesWith(marker: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes(marker) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid));
}

describe('kill -9 of a server mid-burst and mid-provisioning', { timeout: 300_000 }, () => {
  let postgres: PostgresProcess;
  let victim: SpawnedServer;
  let survivor: SpawnedServer;
  let sql: pg.Client;
  let adminToken: string;
  let projectId: string;
  // Both processes run LOCAL sandboxes on this host; one sandbox directory, as a single-host
  // install would configure, so either process can find and stop any sandbox.
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-chaos-'));
  // A unique sleep length marks this test's sandbox processes.
  const marker = `sleep ${600 + Math.floor(Math.random() * 300)}`;
  const repo = createTestRepo({ 'README.md': '# crash\n' });

  beforeAll(async () => {
    postgres = await startPostgresProcess();
    const env = {
      SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`,
      // Processes are counted by command line: bubblewrap and its bridge would repeat it (isolation
      // has its own tests in test/security).
      SINGULACOMP_LOCAL_ISOLATION: 'none',
      SINGULACOMP_PROVISIONING_RESUME_MS: '5000',
      SINGULACOMP_RECOVERY_INTERVAL_MS: '2000',
      SINGULACOMP_JOB_HEARTBEAT_SECONDS: '10',
    };
    victim = await spawnServer({ databaseUrl: postgres.url, dataDir, env, startTimeoutMs: 180_000 });
    survivor = await spawnServer({ databaseUrl: postgres.url, dataDir, env, startTimeoutMs: 180_000 });
    adminToken = [victim, survivor].map((s) => s.bootstrapToken()).find((t): t is string => t !== null)!;
    await postGraphql(
      survivor.graphqlUrl,
      { query: print(UpdateAccountDocument), variables: { input: { concurrentSessionLimit: LIMIT } } },
      adminToken,
    );
    const created = await postGraphql(
      survivor.graphqlUrl,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'crash', repositoryUrl: repo.url } },
      },
      adminToken,
    );
    const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
    if (!project?.project) throw new Error(JSON.stringify(created.json));
    projectId = project.project.id;
    sql = new pg.Client({ connectionString: postgres.url });
    await sql.connect();
  }, 600_000);

  afterAll(async () => {
    await sql?.end();
    await survivor?.stop();
    await victim?.stop();
    killLocalSandboxes(dataDir);
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    rmSync(dataDir, { recursive: true, force: true });
    postgres?.destroy();
  }, 120_000);

  test('every session reaches RUNNING or FAILED within 60 s, exactly the limit stay live, and stopping them leaves no process', async () => {
    const create = (i: number) =>
      postGraphql(
        (i % 2 === 0 ? victim : survivor).graphqlUrl,
        { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: `crash ${i}` } } },
        adminToken,
      ).catch((error: unknown) => ({ status: 0, error: String(error) }));
    const burst = Array.from({ length: BURST }, (_, i) => create(i));
    // Kill the victim as soon as it has admitted something: its reservations, queued and running
    // provisioning jobs are all cut off mid-way.
    await waitFor(
      async () => {
        const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"');
        return (rows[0]?.n ?? 0) > 0;
      },
      { timeoutMs: 60_000, intervalMs: 5 },
    );
    victim.process.kill('SIGKILL');
    const results = await Promise.all(burst);
    // The survivor answered only admits and limit refusals; the victim's requests died with it.
    for (const [i, r] of results.entries()) {
      if (i % 2 === 1) expect([200, 429]).toContain(r.status);
    }

    const killedAt = Date.now();
    const settled = await waitFor(
      async () => {
        const { rows } = await sql.query<{ status: string; n: number }>(
          'SELECT status::text, count(*)::int AS n FROM "Session" GROUP BY status',
        );
        const byStatus = Object.fromEntries(rows.map((r) => [r.status, r.n]));
        return byStatus.PROVISIONING ? null : byStatus;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(Date.now() - killedAt).toBeLessThan(60_000);
    expect(Object.keys(settled).every((s) => s === 'RUNNING' || s === 'FAILED')).toBe(true);
    expect(settled.RUNNING ?? 0).toBeLessThanOrEqual(LIMIT);
    const { rows: failures } = await sql.query<{ failureReason: string }>(
      `SELECT "failureReason" FROM "Session" WHERE status = 'FAILED'`,
    );
    for (const f of failures) expect(f.failureReason).toMatch(/\S/);

    // Every RUNNING session has exactly one live sandbox process; no other sandbox process exists.
    const { rows: running } = await sql.query<{ id: string }>(
      `SELECT id FROM "Session" WHERE status = 'RUNNING'`,
    );
    await waitFor(async () => processesWith(marker).length === running.length, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });

    // Freed slots are usable: the survivor admits up to the limit again.
    for (const { id } of running) {
      const stopped = await postGraphql(
        survivor.graphqlUrl,
        {
          query: 'mutation($id: ID!) { stopSession(input: { sessionId: $id }) { __typename } }',
          variables: { id },
        },
        adminToken,
      );
      expect(stopped.json.data?.stopSession).toEqual({ __typename: 'StopSessionSuccess' });
    }
    await waitFor(async () => processesWith(marker).length === 0, { timeoutMs: 30_000, intervalMs: 200 });
    const { rows: live } = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Session" WHERE status IN ('PROVISIONING', 'RUNNING')`,
    );
    expect(live[0]?.n).toBe(0);
  });
});
