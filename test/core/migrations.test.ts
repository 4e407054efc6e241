// Start-up migrations (R-RUN-3) and the database-level guard on session statuses (R-SES-1).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Database, openDatabase } from '../../server/db';
import { migrate, readMigrations } from '../../server/migrate';
import { type TestDatabase, createTestDatabase } from '../support/database';

const DEAD_STATUSES = ['QUEUED', 'BRANCHING', 'COMPLETED'];

describe('migrations on PostgreSQL', () => {
  let database: TestDatabase;
  let a: Database;
  let b: Database;

  beforeAll(async () => {
    // Empty: these tests are about applying the migrations.
    database = await createTestDatabase('sc_test', { empty: true });
    a = await openDatabase({ url: database.url, dataDir: tmpdir() });
    b = await openDatabase({ url: database.url, dataDir: tmpdir() });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  test('two concurrent runners apply each migration exactly once', async () => {
    const files = await readMigrations();
    expect(files.length).toBeGreaterThan(0);
    const [first, second] = await Promise.all([migrate(a.raw), migrate(b.raw)]);
    // Between them every migration was applied once; the loser of the lock skipped them all.
    expect([...first.applied, ...second.applied].sort()).toEqual(files.map((f) => f.name));
    expect([first.applied.length, second.applied.length].sort()).toEqual([0, files.length]);
    const rows = await a.raw.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      'SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" ORDER BY migration_name',
    );
    expect(rows.map((r) => [r.migration_name, r.checksum])).toEqual(files.map((f) => [f.name, f.checksum]));
    expect(rows.every((r) => r.finished_at instanceof Date)).toBe(true);
  });

  test('running the migrations again is a no-op', async () => {
    const files = await readMigrations();
    const again = await migrate(a.raw);
    expect(again).toEqual({ applied: [], skipped: files.map((f) => f.name), modified: [] });
    const [{ n }] = (await a.raw.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM "_prisma_migrations"',
    )) as [{ n: number }];
    expect(n).toBe(files.length);
  });
});

for (const kind of ['postgres', 'pglite'] as const) {
  describe(`the session status CHECK constraint on ${kind}`, () => {
    let database: TestDatabase | null = null;
    let db: Database;
    let dataDir: string;
    let accountId: string;
    let projectId: string;

    beforeAll(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'sc-mig-'));
      database = kind === 'postgres' ? await createTestDatabase('sc_test', { empty: true }) : null;
      db = await openDatabase({ url: database?.url ?? null, dataDir });
      await migrate(db.raw);
      accountId = randomUUID();
      projectId = randomUUID();
      await db.raw.query(`INSERT INTO "Account" (id, name, "updatedAt") VALUES ($1, 'a', now())`, [
        accountId,
      ]);
      await db.raw.query(
        `INSERT INTO "Project" (id, "accountId", name, "repositoryUrl", "updatedAt") VALUES ($1, $2, 'p', '/tmp/r', now())`,
        [projectId, accountId],
      );
    });
    afterAll(async () => {
      await db?.close();
      await database?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    const insert = (status: string) => {
      const id = randomUUID();
      return db.raw.query(
        `INSERT INTO "Session" (id, "accountId", "projectId", status, "branchName", "baseRef", "updatedAt")
         VALUES ($1, $2, $3, $4::"SessionStatus", $5, 'main', now())`,
        [id, accountId, projectId, status, id],
      );
    };

    test.each(DEAD_STATUSES)('a raw insert with status %s is refused by the database', async (status) => {
      await expect(insert(status)).rejects.toThrow(/check constraint/i);
      const rows = await db.raw.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "Session" WHERE status::text = $1`,
        [status],
      );
      expect(rows[0]?.n).toBe(0);
    });

    test('the four written statuses are accepted, and no update can move a row to a dead status', async () => {
      for (const status of ['PROVISIONING', 'RUNNING', 'STOPPED', 'FAILED']) await insert(status);
      for (const status of DEAD_STATUSES) {
        await expect(
          db.raw.query(`UPDATE "Session" SET status = $1::"SessionStatus"`, [status]),
        ).rejects.toThrow(/check constraint/i);
      }
      const rows = await db.raw.query<{ status: string }>(
        'SELECT status::text AS status FROM "Session" ORDER BY 1',
      );
      expect(rows.map((r) => r.status)).toEqual(['FAILED', 'PROVISIONING', 'RUNNING', 'STOPPED']);
      // Through Prisma too: the generated client exposes the enum value, the database still refuses it.
      await expect(db.prisma.session.updateMany({ data: { status: 'QUEUED' } })).rejects.toThrow();
    });
  });
}
