// Raw SQL on PostgreSQL: a statement named `prepared` is parsed and planned once per connection
// and then executed by name, with each call's own parameters.
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Database, openDatabase } from '../../server/db';
import { statementNames } from '../../server/fast-paths/statement-names';
import { type TestDatabase, createTestDatabase, withClient } from '../support/database';
import { waitFor } from '../support/wait';

describe('raw SQL on PostgreSQL', () => {
  let database: TestDatabase;
  let db: Database;

  beforeAll(async () => {
    database = await createTestDatabase('sc_test', { empty: true });
    // One connection: every statement below sees the same session's prepared statements.
    db = await openDatabase({ url: database.url, dataDir: tmpdir(), poolSize: 1 });
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  test('a prepared query is kept on the connection by its name and runs with each call’s parameters', async () => {
    const text = 'SELECT $1::int * 2 AS "doubled", $2::text AS "label"';
    expect(await db.raw.query(text, [21, 'first'], { prepared: 'probe-double' })).toEqual([
      { doubled: 42, label: 'first' },
    ]);
    expect(await db.raw.query(text, [5, 'second'], { prepared: 'probe-double' })).toEqual([
      { doubled: 10, label: 'second' },
    ]);
    const kept = await db.raw.query<{ name: string; statement: string }>(
      'SELECT "name", "statement" FROM pg_prepared_statements ORDER BY "name"',
    );
    expect(kept).toEqual([{ name: 'probe-double', statement: text }]);
    // Without a name nothing is kept.
    await db.raw.query('SELECT $1::int AS "n"', [1]);
    expect(
      (await db.raw.query<{ name: string }>('SELECT "name" FROM pg_prepared_statements')).map((r) => r.name),
    ).toEqual(['probe-double']);
  });

  test("Prisma's statements are prepared once per connection, named by their text", async () => {
    const doubled = (n: number) =>
      db.prisma.$queryRaw<Array<{ doubled: number }>>`SELECT ${n}::int * 2 AS "doubled"`;
    expect(await doubled(21)).toEqual([{ doubled: 42 }]);
    expect(await doubled(5)).toEqual([{ doubled: 10 }]);
    const kept = await db.raw.query<{ name: string; statement: string }>(
      `SELECT "name", "statement" FROM pg_prepared_statements WHERE "name" LIKE 'prisma-%'`,
    );
    expect(kept).toEqual([
      { name: expect.stringMatching(/^prisma-[\w-]{24}$/), statement: 'SELECT $1::int * 2 AS "doubled"' },
    ]);
  });

  test('generated list reads (rows as arrays) are prepared once per connection, named by their text', async () => {
    const text = 'SELECT $1::int + 1 AS "next", $2::text AS "label"';
    expect(await db.raw.queryArrays(text, [1, 'a'])).toEqual([[2, 'a']]);
    expect(await db.raw.queryArrays(text, [41, 'b'])).toEqual([[42, 'b']]);
    const kept = await db.raw.query<{ name: string; statement: string }>(
      `SELECT "name", "statement" FROM pg_prepared_statements WHERE "name" LIKE 'rows-%'`,
    );
    expect(kept).toEqual([{ name: expect.stringMatching(/^rows-[\w-]{24}$/), statement: text }]);
  });

  test('only the first texts up to the bound get a name; the same text always gets the same one', () => {
    const name = statementNames('prisma', 2);
    const a = name({ sql: 'SELECT 1' });
    const b = name({ sql: 'SELECT 2' });
    expect(a).toMatch(/^prisma-/);
    expect(b).toMatch(/^prisma-/);
    expect(b).not.toBe(a);
    expect(name({ sql: 'SELECT 3' })).toBeUndefined();
    expect(name({ sql: 'SELECT 1' })).toBe(a);
  });

  test('a connection the server ends while it is checked out fails its statement, not the process, and the pool goes on', async () => {
    const held = db.raw.withLock(4_242n, async () => {
      // The lock's connection sits checked out and idle while this runs; the server ends it.
      const [backend] = (
        await withClient((client) =>
          client.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'SELECT pg_advisory_lock%'`,
            [database.name],
          ),
        )
      ).rows;
      expect(backend).toBeDefined();
      await withClient((client) => client.query('SELECT pg_terminate_backend($1)', [backend!.pid]));
      // Gone on the server: its FATAL notice has reached the client's socket.
      await waitFor(
        async () =>
          (
            await withClient((client) =>
              client.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend!.pid]),
            )
          ).rowCount === 0,
        10_000,
        'the backend to be gone',
      );
    });
    // The unlock on the dead connection fails; the process is still here, and so is the pool.
    await expect(held).rejects.toThrow();
    expect(await db.raw.query('SELECT 2 AS "n"')).toEqual([{ n: 2 }]);
  });
});
