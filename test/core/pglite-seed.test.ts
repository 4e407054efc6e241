// The embedded database's seed: a first start copies a migrated data directory instead of running
// initdb (and pg-boss's schema), and never touches a data directory that already holds a database.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, expect, test } from 'vitest';
import { readMigrations } from '../../server/migrate';
import { buildPgliteSeed, seedPgliteDataDir } from '../../server/pglite-seed';

const root = mkdtempSync(join(tmpdir(), 'sc-seed-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('a new data dir is filled from the seed with every migration applied; an existing one is left alone', async () => {
  await buildPgliteSeed();
  const target = join(root, 'pglite');
  expect(await seedPgliteDataDir(target)).toBe(true);

  const lite = await PGlite.create(target);
  try {
    // Nothing ran migrations here: the rows come from the seed.
    const applied = await lite.query<{ migration_name: string }>(
      'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL ORDER BY migration_name',
    );
    expect(applied.rows.map((r) => r.migration_name)).toEqual((await readMigrations()).map((m) => m.name));
    // The job queue's schema too (its queues are created by the first start, with its settings).
    const boss = await lite.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'pgboss' AND table_name = 'version'`,
    );
    expect(boss.rows).toEqual([{ n: 1 }]);
    await lite.exec(`CREATE TABLE kept (v text); INSERT INTO kept VALUES ('mine')`);
  } finally {
    await lite.close();
  }

  // A second first start (or a restart) never replaces a database that exists.
  expect(await seedPgliteDataDir(target)).toBe(false);
  const again = await PGlite.create(target);
  try {
    expect((await again.query<{ v: string }>('SELECT v FROM kept')).rows).toEqual([{ v: 'mine' }]);
  } finally {
    await again.close();
  }
});
