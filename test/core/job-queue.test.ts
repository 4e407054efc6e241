// The job queue (pg-boss on PostgreSQL): a job sent from this process starts on this process's
// worker at once, not at the worker's next poll, and a backlog drains as fast as the workers run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JOBS, type JobQueue, createJobQueue } from '../../resolvers/jobs/queue';
import { type Database, openDatabase } from '../../server/db';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { deferred, waitFor } from '../support/wait';

describe('job queue', () => {
  let testDb: TestDatabase;
  let database: Database;
  let queue: JobQueue;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-jobs-'));

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ url: testDb.url, dataDir });
    // A poll interval far beyond the test's timeout: only the send's wake-up can start a job.
    queue = createJobQueue({ database, logger: pino({ level: 'silent' }), pollingIntervalSeconds: 3_600 });
    await queue.start();
  });
  afterAll(async () => {
    await queue?.stop(5_000);
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // First, while no worker of this file runs: the jobs stay queued.
  test('sends made together go out in one insert, and each caller learns whether its own job was queued', async () => {
    const keys = ['together-1', 'together-2', 'together-1'];
    const ids = await Promise.all(keys.map((key, n) => queue.send(JOBS.provision, { n: 100 + n }, key)));
    const queuedIds = ids.filter((id): id is string => id !== null);
    try {
      // The provision queue is stately: a key with a job queued takes no second one.
      expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
      expect(ids[1]).toMatch(/^[0-9a-f-]{36}$/);
      expect(ids[1]).not.toBe(ids[0]);
      expect(ids[2]).toBeNull();
      // Rows written by one statement share its transaction id; separate sends would not.
      const rows = await database.raw.query<{ id: string; xmin: string; n: number }>(
        `SELECT "id"::text AS "id", xmin::text AS "xmin", ("data"->>'n')::int AS "n"
         FROM pgboss.job WHERE "id" = ANY($1::uuid[]) ORDER BY "n"`,
        [queuedIds],
      );
      expect(rows.map((row) => [row.id, row.n])).toEqual([
        [ids[0], 100],
        [ids[1], 101],
      ]);
      expect(new Set(rows.map((row) => row.xmin)).size).toBe(1);
      const queued = await Promise.all(
        ['together-1', 'together-2'].map((key) => queue.history(JOBS.provision, key)),
      );
      expect(queued.map((jobs) => jobs.map((job) => [job.id, job.state]))).toEqual([
        [[ids[0], 'created']],
        [[ids[1], 'created']],
      ]);
    } finally {
      // The workers of the tests below must not find them.
      await queue.boss.deleteJob(JOBS.provision, queuedIds);
    }
  }, 60_000);

  test("a job sent on this process starts on its worker without waiting for the worker's next poll", async () => {
    const ran: number[] = [];
    const waiters = new Map<number, () => void>();
    const ranJob = (n: number) => new Promise<void>((resolve) => waiters.set(n, resolve));
    await queue.work<{ n: number }>(JOBS.teardown, async (job) => {
      ran.push(job.data.n);
      waiters.get(job.data.n)?.();
    });
    // Each job is sent once the worker is idle again: having found nothing on its last fetch, it
    // sleeps for an hour unless woken.
    for (const n of [1, 2, 3]) {
      const started = ranJob(n);
      await queue.send(JOBS.teardown, { n }, `job-${n}`);
      await started;
    }
    expect(ran).toEqual([1, 2, 3]);
  }, 60_000);

  test('a backlog that queued while every worker was busy drains without waiting for a poll', async () => {
    // The default four workers each take one job and hold it; six more queue up behind them. Once
    // released, each worker must fetch its next job at once: their next poll is an hour away.
    const holding = new Set<number>();
    const done: number[] = [];
    const released = deferred();
    const held = deferred();
    const finished = deferred();
    await queue.work<{ n: number }>(JOBS.provision, async (job) => {
      if (job.data.n <= 4) {
        holding.add(job.data.n);
        if (holding.size === 4) held.resolve();
        await released.promise;
      }
      done.push(job.data.n);
      if (done.length === 10) finished.resolve();
    });
    for (const n of [1, 2, 3, 4]) await queue.send(JOBS.provision, { n }, `held-${n}`);
    await held.promise;
    for (let n = 5; n <= 10; n++) await queue.send(JOBS.provision, { n }, `queued-${n}`);
    released.resolve();
    await finished.promise;
    expect(done.toSorted((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // Completed in the queue too, not only run: pg-boss marks the job after its handler returned.
    const states = await waitFor(async () => {
      const history = await queue.history(JOBS.provision, 'queued-10');
      return history.every((job) => job.state === 'completed') && history.map((job) => job.state);
    }, 30_000);
    expect(states).toEqual(['completed']);
  }, 60_000);
});
