// Applies prisma/migrations at start-up (R-RUN-3) without Prisma's Rust schema engine. Bookkeeping
// uses Prisma's own `_prisma_migrations` table, so `prisma migrate deploy` and `migrate status` agree
// with what ran here. An advisory lock makes concurrent start-ups apply each migration exactly once.
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { RawSql } from './db';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../prisma/migrations', import.meta.url));

/** Same number Prisma's migrate uses for its advisory lock, so our runner and the CLI exclude each other. */
const MIGRATION_LOCK_KEY = 72_707_369n;

const BOOKKEEPING = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id" VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum" VARCHAR(64) NOT NULL,
  "finished_at" TIMESTAMPTZ,
  "migration_name" VARCHAR(255) NOT NULL,
  "logs" TEXT,
  "rolled_back_at" TIMESTAMPTZ,
  "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

export interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

const checksum = (sql: string): string => createHash('sha256').update(sql).digest('hex');

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(`${dir}/${name}/migration.sql`, 'utf8');
      return { name, sql, checksum: checksum(sql) };
    }),
  );
}

/** readMigrations without yielding: for start-up work that must begin before the server loads. */
export function readMigrationsSync(dir = MIGRATIONS_DIR): MigrationFile[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(`${dir}/${name}/migration.sql`, 'utf8');
      return { name, sql, checksum: checksum(sql) };
    });
}

/** Thrown when a migration failed before and was never resolved: the schema is in an unknown state. */
export class FailedMigrationError extends Error {
  constructor(name: string) {
    super(
      `Migration ${name} failed earlier and was not resolved. Fix the database, then mark it with ` +
        '`prisma migrate resolve --rolled-back` (or --applied) and restart.',
    );
  }
}

export interface MigrateResult {
  applied: string[];
  skipped: string[];
  /** Applied migrations whose file changed since (Prisma deploy also only warns). */
  modified: string[];
}

export async function migrate(
  raw: Pick<RawSql, 'exec' | 'query' | 'withLock'>,
  dir = MIGRATIONS_DIR,
): Promise<MigrateResult> {
  const files = await readMigrations(dir);
  return raw.withLock(MIGRATION_LOCK_KEY, async () => {
    await raw.exec(BOOKKEEPING);
    const rows = await raw.query<{
      migration_name: string;
      checksum: string;
      finished_at: Date | null;
      rolled_back_at: Date | null;
    }>('SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"');
    const result: MigrateResult = { applied: [], skipped: [], modified: [] };
    for (const file of files) {
      const history = rows.filter((r) => r.migration_name === file.name && r.rolled_back_at === null);
      const done = history.find((r) => r.finished_at !== null);
      if (done) {
        result.skipped.push(file.name);
        if (done.checksum !== file.checksum) result.modified.push(file.name);
        continue;
      }
      if (history.length > 0) throw new FailedMigrationError(file.name);
      const id = randomUUID();
      // PostgreSQL DDL is transactional: a failing migration leaves no partial schema behind and
      // no bookkeeping row, so fixing the file and restarting is enough.
      await raw
        .exec(
          `BEGIN;\n${file.sql}\n;INSERT INTO "_prisma_migrations" ("id","checksum","finished_at","migration_name","applied_steps_count") VALUES ('${id}','${file.checksum}',now(),'${file.name.replace(/'/g, "''")}',1);\nCOMMIT;`,
        )
        .catch(async (error: unknown) => {
          await raw.exec('ROLLBACK').catch(() => {});
          throw new Error(`Migration ${file.name} failed: ${(error as Error).message}`);
        });
      result.applied.push(file.name);
    }
    return result;
  });
}
