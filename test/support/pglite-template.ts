// A migrated PGlite data directory shared by the tests: PGlite's initdb runs in WebAssembly and takes
// seconds on an idle machine, tens of seconds on a loaded one, for every fresh database. Each test
// copies this template instead. It is keyed by the PGlite version and the migration files, kept
// under node_modules/.cache across runs, and created atomically (build in a private directory, then
// rename), so parallel test workers never see half of one.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { migrate, readMigrations } from '../../server/migrate';

const ROOT = new URL('../..', import.meta.url).pathname;

let template: Promise<string> | null = null;

export function pgliteTemplate(): Promise<string> {
  template ??= build();
  return template;
}

async function build(): Promise<string> {
  // The package's exports do not include package.json; read it by path.
  const { version } = JSON.parse(
    readFileSync(join(ROOT, 'node_modules', '@electric-sql', 'pglite', 'package.json'), 'utf8'),
  ) as { version: string };
  const hash = createHash('sha256').update(version);
  for (const file of await readMigrations()) hash.update(file.name).update(file.checksum);
  const cache = join(ROOT, 'node_modules', '.cache', 'singulacomp-test');
  const dir = join(cache, `pglite-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(join(dir, 'PG_VERSION'))) return dir;

  mkdirSync(cache, { recursive: true });
  const building = `${dir}.${process.pid}.${Date.now()}`;
  const lite = await PGlite.create(building);
  let chain: Promise<unknown> = Promise.resolve();
  await migrate({
    exec: async (sql) => {
      await lite.exec(sql);
    },
    query: async (sql, params) => (await lite.query(sql, params as unknown[])).rows as never[],
    withLock: (_key, fn) => {
      const run = chain.then(fn, fn);
      chain = run.catch(() => {});
      return run;
    },
    close: async () => {},
  });
  await lite.close();
  try {
    renameSync(building, dir);
  } catch {
    // Another worker finished first: use theirs.
    rmSync(building, { recursive: true, force: true });
  }
  return dir;
}
