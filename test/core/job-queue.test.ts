// The job queue (pg-boss on PostgreSQL): a job sent from this process starts on this process's
// worker at once, not at the worker's next poll.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JOBS, type JobQueue, createJobQueue } from '../../resolvers/jobs/queue';
import { type Database, openDatabase } from '../../server/db';
import { type TestDatabase, createTestDatabase } from '../support/database';

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
});
