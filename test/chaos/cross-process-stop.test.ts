// Any server process can stop any LOCAL sandbox on its host: two processes with separate data dirs
// (each launching into its own directory), sessions created through one and stopped through the
// other. The reconciler stops a sandbox process that no live session owns any more.
import { execFileSync } from 'node:child_process';
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument, CreateSessionDocument } from '../generated/graphql';
import { createTestRepo } from '../support/git';
import { type PostgresProcess, startPostgresProcess } from '../support/postgres-process';
import { type SpawnedServer, postGraphql, spawnServer } from '../support/spawn-server';
import { waitFor } from '../support/wait';

const SESSIONS = 6;

function processesWith(marker: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes(marker) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid));
}

describe('stopping LOCAL sandboxes from another server process', { timeout: 300_000 }, () => {
  let postgres: PostgresProcess;
  let creator: SpawnedServer;
  let stopper: SpawnedServer;
  let sql: pg.Client;
  let adminToken: string;
  let projectId: string;
  const marker = `sleep ${900 + Math.floor(Math.random() * 300)}`;
  const repo = createTestRepo({ 'README.md': '# stop\n' });

  beforeAll(async () => {
    postgres = await startPostgresProcess();
    const env = {
      SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`,
      // Processes are counted by command line: bubblewrap and its bridge would repeat it (isolation
      // has its own tests in test/security).
      SINGULACOMP_LOCAL_ISOLATION: 'none',
      SINGULACOMP_RECONCILE_INTERVAL_MS: '1000',
    };
    creator = await spawnServer({ databaseUrl: postgres.url, env, startTimeoutMs: 180_000 });
    stopper = await spawnServer({ databaseUrl: postgres.url, env, startTimeoutMs: 180_000 });
    adminToken = [creator, stopper].map((s) => s.bootstrapToken()).find((t): t is string => t !== null)!;
    const created = await postGraphql(
      creator.graphqlUrl,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'stop', repositoryUrl: repo.url } },
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
    await creator?.stop();
    await stopper?.stop();
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    postgres?.destroy();
  }, 120_000);

  async function createRunning(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await postGraphql(
        creator.graphqlUrl,
        { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: `stop ${i}` } } },
        adminToken,
      );
      const payload = r.json.data?.createSession as { session?: { sessionId: string } } | undefined;
      if (!payload?.session) throw new Error(JSON.stringify(r.json));
      ids.push(payload.session.sessionId);
    }
    await waitFor(
      async () => {
        const { rows } = await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1::uuid[]) AND status = 'RUNNING'`,
          [ids],
        );
        return rows[0]?.n === n;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    return ids;
  }

  test('every sandbox created by one process and stopped through the other has no process left', async () => {
    const ids = await createRunning(SESSIONS);
    expect(processesWith(marker)).toHaveLength(SESSIONS);
    for (const id of ids) {
      const r = await postGraphql(
        stopper.graphqlUrl,
        {
          query: 'mutation($id: ID!) { stopSession(input: { sessionId: $id }) { __typename } }',
          variables: { id },
        },
        adminToken,
      );
      expect(r.json.data?.stopSession).toEqual({ __typename: 'StopSessionSuccess' });
    }
    // stopSession returns after the teardown: nothing to wait for.
    expect(processesWith(marker)).toEqual([]);
    const { rows } = await sql.query<{ status: string }>(
      `SELECT s.status::text FROM "Sandbox" s WHERE s."sessionId" = ANY($1::uuid[])`,
      [ids],
    );
    expect(rows.map((r) => r.status)).toEqual(Array(SESSIONS).fill('DESTROYED'));
  });

  test('the reconciler stops a sandbox process whose session is no longer live', async () => {
    const [id] = await createRunning(1);
    expect(processesWith(marker)).toHaveLength(1);
    // A teardown that never ran: the session is stopped in the database only.
    await sql.query(`UPDATE "Session" SET status = 'STOPPED', "stopReason" = 'USER' WHERE id = $1::uuid`, [
      id,
    ]);
    await waitFor(async () => processesWith(marker).length === 0, { timeoutMs: 30_000, intervalMs: 100 });
    // The reconciler forgets the process identity once the process is gone (right after the kill).
    const recorded = async () =>
      (
        await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "LocalSandboxProcess" WHERE "sessionId" = $1::uuid`,
          [id],
        )
      ).rows[0]?.n;
    await waitFor(async () => (await recorded()) === 0, { timeoutMs: 30_000, intervalMs: 100 });
    expect(await recorded()).toBe(0);
    expect(processesWith(marker)).toEqual([]);
  });
});
