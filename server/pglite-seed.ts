// The embedded database's seed: a migrated, empty PGlite data directory (with pg-boss's schema, no
// queues) built once per PGlite and pg-boss version and migration set, and copied into a new data
// dir on first start. PGlite's initdb (and pg-boss's schema) runs in WebAssembly and takes seconds on
// an idle machine (tens of seconds on a loaded one); a copy takes a fraction of one. `npm install`
// builds it (scripts/build-pglite-seed.ts); without it, first start runs initdb as before. Built in
// a private directory and renamed into place, so concurrent builders (test workers, two installs)
// never expose half of one.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { pgliteRawSql } from './db';
import { migrate, readMigrations } from './migrate';
import { installJobSchema } from '../resolvers/jobs/queue';

const ROOT = new URL('..', import.meta.url).pathname;

// The packages' exports do not include package.json; read it by path.
const versionOf = (...name: string[]): string =>
  (
    JSON.parse(readFileSync(join(ROOT, 'node_modules', ...name, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;

/** Where the seed for the installed PGlite and pg-boss and the current migrations lives (it may not exist). */
export async function pgliteSeedDir(): Promise<string> {
  const hash = createHash('sha256')
    .update(versionOf('@electric-sql', 'pglite'))
    .update(`pg-boss@${versionOf('pg-boss')}`);
  for (const file of await readMigrations()) hash.update(file.name).update(file.checksum);
  return join(
    ROOT,
    'node_modules',
    '.cache',
    'singulacomp',
    `pglite-seed-${hash.digest('hex').slice(0, 16)}`,
  );
}

const isDataDir = (dir: string): boolean => existsSync(join(dir, 'PG_VERSION'));

/** Builds the seed unless it exists; returns its directory. */
export async function buildPgliteSeed(): Promise<string> {
  const dir = await pgliteSeedDir();
  if (isDataDir(dir)) return dir;
  mkdirSync(join(dir, '..'), { recursive: true });
  const building = `${dir}.${process.pid}.${Date.now()}`;
  const lite = await PGlite.create(building);
  try {
    await migrate(pgliteRawSql(lite));
    // The job queue's tables: the first start then only creates its queues (milliseconds).
    await installJobSchema(lite);
  } finally {
    await lite.close();
  }
  try {
    renameSync(building, dir);
  } catch {
    // Another builder finished first: keep theirs.
    rmSync(building, { recursive: true, force: true });
  }
  return dir;
}

/**
 * Fills `target` from the seed when `target` holds no database yet and a seed exists. Returns
 * whether it did; the caller's migrations still run (they find every seeded one applied).
 */
export async function seedPgliteDataDir(target: string): Promise<boolean> {
  if (isDataDir(target)) return false;
  const seed = await pgliteSeedDir().catch(() => null);
  if (!seed || !isDataDir(seed)) return false;
  // A first start that died mid-initdb leaves a partial directory behind: replace it whole.
  rmSync(target, { recursive: true, force: true });
  const partial = `${target}.seeding-${process.pid}`;
  cpSync(seed, partial, { recursive: true });
  renameSync(partial, target);
  return true;
}
