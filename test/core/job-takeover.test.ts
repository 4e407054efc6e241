// Jobs whose owning process is gone are taken over by another process (resolvers/jobs/queue.ts):
// a provisioning job held for its creator is released, a running job is failed so it is retried at
// once; while the owner lives, neither is touched. Each "process" here is a database handle of its
// own (its own pools and lock connection); closing its process locks is how it dies, as PostgreSQL
// sees a killed process: its locks are gone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JOBS, type JobQueue, createJobQueue } from '../../resolvers/jobs/queue';
import { type Database, openDatabase } from '../../server/db';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { deferred, waitFor } from '../support/wait';

const HOUR_MS = 3_600_000;

describe('taking over the jobs of a process that is gone', () => {
  let testDb: TestDatabase;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-takeover-'));
  const databases: Database[] = [];
  const queues: JobQueue[] = [];
  const blocked = deferred<void>();

  /** A process: its own database handle and job queue; no periodic look (the test looks). */
  async function startProcess(): Promise<{ database: Database; queue: JobQueue }> {
    const database = await openDatabase({ url: testDb.url, dataDir });
    const queue = createJobQueue({
      database,
      logger: pino({ level: 'silent' }),
      pollingIntervalSeconds: 3_600,
      orphanCheckMs: HOUR_MS,
      holdMs: HOUR_MS,
    });
    await queue.start();
    databases.push(database);
    queues.push(queue);
    return { database, queue };
  }

  const job = async (database: Database, id: string) => {
    const [row] = await database.raw.query<{ state: string; data: Record<string, unknown>; due: boolean }>(
      `SELECT state::text, data, start_after <= now() AS due FROM pgboss.job WHERE id = $1::uuid`,
      [id],
    );
    return row!;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    blocked.resolve();
    for (const queue of queues) await queue.stop(2_000);
    for (const database of databases) await database.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('a held provisioning job is released once its creator is gone, not before', async () => {
    const creator = await startProcess();
    const other = await startProcess();
    await creator.queue.holdProvision(['held-session']);
    await creator.queue.writeProvision(creator.database.jobSql!, [{ sessionId: 'held-session' }]);
    const rows = await creator.database.raw.query<{ id: string }>(
      `SELECT id::text FROM pgboss.job WHERE name = $1 AND singleton_key = 'held-session'`,
      [JOBS.provision],
    );
    expect(rows).toHaveLength(1);
    const id = rows[0]!.id;
    expect(await job(creator.database, id)).toMatchObject({ state: 'created', due: false });
    expect((await job(creator.database, id)).data).toMatchObject({ held: true, cutBranch: true });

    // The creator lives: two looks in a row leave its job alone.
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);

    await creator.database.processLocks.close();
    // The first look only notes it; the second takes it over.
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);
    expect(await other.queue.takeOverOrphans(false)).toEqual([id]);
    const released = await job(other.database, id);
    expect(released).toMatchObject({ state: 'created', due: true });
    expect(released.data).not.toHaveProperty('held');
    // It runs without its creator's cut: it cuts the branch if missing.
    expect(released.data).toMatchObject({ sessionId: 'held-session', cutBranch: true });
  });

  test('a running job is retried at once when its process is gone, not before', async () => {
    const runner = await startProcess();
    const other = await startProcess();
    const started = deferred<string>();
    await runner.queue.work<{ sessionId: string }>(JOBS.teardown, async (j) => {
      started.resolve(j.id);
      await blocked.promise;
    });
    await runner.queue.send(
      JOBS.teardown,
      { sessionId: 'running-session', reason: 'USER' },
      'running-session',
    );
    const id = await started.promise;
    expect(await job(other.database, id)).toMatchObject({ state: 'active' });
    // Its owner lives: left alone, also once it has run past the two seconds a fetch is given.
    await waitFor(
      async () =>
        (
          await other.database.raw.query(
            `SELECT 1 FROM pgboss.job WHERE id = $1::uuid AND started_on < now() - interval '2 seconds'`,
            [id],
          )
        ).length === 1,
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);

    await runner.database.processLocks.close();
    // Two looks in a row find its lock gone.
    expect(await other.queue.takeOverOrphans(false)).toEqual([]);
    expect(await other.queue.takeOverOrphans(false)).toEqual([id]);
    expect(await job(other.database, id)).toMatchObject({ state: 'retry', due: true });
  });
});
