// The daemon's SQLite access (node:sqlite in a child process per call): parameters are bound, a write is one
// transaction, and a database locked by someone else does not block the daemon's event loop.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { runSqlite, writeSqlite } from '../../agent/sqlite';

describe('agent sqlite', () => {
  let dir: string;
  let db: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-sqlite-'));
    db = join(dir, 'transcript.db');
    const setup = new DatabaseSync(db);
    setup.exec('PRAGMA journal_mode = WAL; CREATE TABLE part (id TEXT PRIMARY KEY, data TEXT NOT NULL);');
    setup.close();
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  test('binds parameters and writes all statements or none', async () => {
    const quote = `it's "quoted"; DROP TABLE part; --`;
    await writeSqlite(db, [
      { sql: 'INSERT INTO part (id, data) VALUES (?, ?)', params: ['a', quote] },
      { sql: 'INSERT INTO part (id, data) VALUES (?, ?)', params: ['b', '{}'] },
    ]);
    expect(await runSqlite(db, 'SELECT id, data FROM part WHERE id = ?', ['a'])).toEqual([
      { id: 'a', data: quote },
    ]);

    // The second statement violates the primary key: the first is rolled back with it.
    await expect(
      writeSqlite(db, [
        { sql: 'UPDATE part SET data = ? WHERE id = ?', params: ['changed', 'a'] },
        { sql: 'INSERT INTO part (id, data) VALUES (?, ?)', params: ['b', 'again'] },
      ]),
    ).rejects.toThrow(/UNIQUE constraint failed/);
    expect(await runSqlite<{ data: string }>(db, 'SELECT data FROM part WHERE id = ?', ['a'])).toEqual([
      { data: quote },
    ]);
  });

  test('a write waiting for a lock held on this thread does not block it: the lock is released and the write lands', async () => {
    const holder = new DatabaseSync(db);
    holder.exec("BEGIN IMMEDIATE; INSERT INTO part (id, data) VALUES ('held', 'x');");
    const write = writeSqlite(
      db,
      [{ sql: 'INSERT INTO part (id, data) VALUES (?, ?)', params: ['w', 'y'] }],
      {
        busyTimeoutMs: 60_000,
      },
    );
    // Had the write run on this thread, it would wait here until its busy timeout and fail.
    await new Promise((resolve) => setImmediate(resolve));
    holder.exec('COMMIT');
    holder.close();
    await write;
    expect(await runSqlite<{ id: string }>(db, 'SELECT id FROM part ORDER BY id')).toEqual([
      { id: 'held' },
      { id: 'w' },
    ]);
  });

  test('a database locked past the busy timeout fails the call with the reason', async () => {
    const holder = new DatabaseSync(db);
    holder.exec('BEGIN IMMEDIATE');
    try {
      await expect(
        writeSqlite(db, [{ sql: 'INSERT INTO part (id, data) VALUES (?, ?)', params: ['late', 'z'] }], {
          busyTimeoutMs: 200,
        }),
      ).rejects.toThrow(/database is locked/);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(await runSqlite(db, 'SELECT id FROM part')).toEqual([]);
  });
});
