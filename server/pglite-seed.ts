// The embedded database's seed: a migrated, empty PGlite data directory (with pg-boss's schema, no
// queues) built once per PGlite and pg-boss version and migration set, and copied into a new data
// dir on first start. PGlite's initdb (and pg-boss's schema) runs in WebAssembly and takes seconds on
// an idle machine (tens of seconds on a loaded one); a copy takes a fraction of one. `npm install`
// builds it (scripts/build-pglite-seed.ts); without it, first start runs initdb as before. Built in
// a private directory and renamed into place, so concurrent builders (test workers, two installs)
// never expose half of one.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { readMigrationsSync } from './migrate';

const ROOT = new URL('..', import.meta.url).pathname;

// The packages' exports do not include package.json; read it by path.
const versionOf = (...name: string[]): string =>
  (
    JSON.parse(readFileSync(join(ROOT, 'node_modules', ...name, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;

/** Where the seed for the installed PGlite and pg-boss and the current migrations lives (it may not exist). */
export function pgliteSeedDir(): string {
  const hash = createHash('sha256')
    .update(versionOf('@electric-sql', 'pglite'))
    .update(`pg-boss@${versionOf('pg-boss')}`);
  for (const file of readMigrationsSync()) hash.update(file.name).update(file.checksum);
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
  const dir = pgliteSeedDir();
  if (isDataDir(dir)) return dir;
  // Loaded here only: `npm start` imports this module before the rest of the server (main.ts).
  const [{ PGlite }, { pgliteRawSql }, { migrate }, { installJobSchema }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('./db'),
    import('./migrate'),
    import('../resolvers/jobs/queue'),
  ]);
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

/** cpSync on a worker thread: the main thread goes on loading the server meanwhile. */
function copyOffThread(from: string, to: string): Promise<void> {
  const worker = new Worker(
    "require('node:fs').cpSync(require('node:worker_threads').workerData.from, require('node:worker_threads').workerData.to, { recursive: true });",
    { eval: true, workerData: { from, to } },
  );
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`seed copy exited with ${code}`)),
    );
  });
}

const seeding = new Map<string, Promise<boolean>>();
const firstStarts = new Set<string>();

/**
 * Fills `target` from the seed when `target` holds no database yet and a seed exists. Returns
 * whether it did; the caller's migrations still run (they find every seeded one applied). The copy
 * runs on a worker thread; a second call for the same target while it runs shares it (main.ts
 * starts it before loading the rest of the server, buildApp waits for it).
 */
export function seedPgliteDataDir(target: string): Promise<boolean> {
  const pending = seeding.get(target);
  if (pending) return pending;
  if (isDataDir(target)) return Promise.resolve(false);
  firstStarts.add(target);
  const started = seed(target).finally(() => seeding.delete(target));
  seeding.set(target, started);
  return started;
}

/** Whether this process found `target` without a database (its first start), even if filled since. */
export const isFirstStartOf = (target: string): boolean => firstStarts.has(target);

async function seed(target: string): Promise<boolean> {
  let seed: string;
  try {
    seed = pgliteSeedDir();
  } catch {
    return false;
  }
  if (!isDataDir(seed)) return false;
  // A first start that died mid-initdb leaves a partial directory behind: replace it whole.
  rmSync(target, { recursive: true, force: true });
  const partial = `${target}.seeding-${process.pid}`;
  await copyOffThread(seed, partial);
  renameSync(partial, target);
  return true;
}
