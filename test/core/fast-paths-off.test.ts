// With SINGULACOMP_FAST_PATHS=off the server runs plain yoga and Prisma (server/fast-paths/README.md):
// no request is answered from node:http, a sessions page is read by Prisma and not as the one
// generated statement, and no statement is prepared under a generated name.
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Database, openDatabase } from '../../server/db';
import { SessionsDocument, type SessionsQuery } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestDatabase, createTestDatabase } from '../support/database';

describe('the server with SINGULACOMP_FAST_PATHS=off', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ env: { SINGULACOMP_FAST_PATHS: 'off' } });
    const prisma = t.app.services.db;
    const admin = await prisma.user.findFirstOrThrow({ where: { email: 'admin@localhost' } });
    const project = await prisma.project.create({
      data: { accountId: admin.accountId, name: 'off', repositoryUrl: 'https://example.com/off.git' },
    });
    for (let i = 0; i < 3; i++) {
      const id = randomUUID();
      await prisma.session.create({
        data: {
          id,
          accountId: admin.accountId,
          projectId: project.id,
          status: 'STOPPED',
          branchName: id,
          baseRef: 'main',
          createdAt: new Date(Date.now() - i * 1_000),
        },
      });
    }
  });
  afterAll(async () => t?.stop());

  async function fastPathOutcomes(): Promise<string[]> {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith('singulacomp_graphql_fast_path_total{'));
  }

  test('a repeated query is answered by yoga each time and its page read by Prisma', async () => {
    const body = { query: print(SessionsDocument), variables: { first: 3 } };
    await t.raw(body); // the text yoga has run, which the HTTP fast path would answer next
    const stats = t.app.services.database.stats;
    const requestId = randomUUID();
    stats.log = [];
    const res = await t.raw(body, undefined, { 'x-request-id': requestId });
    const log = stats.log.filter((s) => s.requestId === requestId).map((s) => s.sql);
    stats.log = null;
    expect(res.errors).toBeUndefined();
    const edges = (res.data as SessionsQuery).sessions.edges;
    expect(edges.map((e) => e.node.project.name)).toEqual(['off', 'off', 'off']);
    expect(await fastPathOutcomes()).toEqual([]);
    expect(log.length).toBeGreaterThan(0);
    expect(log.filter((sql) => /FROM "Session" t0 LEFT JOIN/.test(sql))).toEqual([]);
  });
});

describe('the database with named statements off', () => {
  let database: TestDatabase;
  let db: Database;

  beforeAll(async () => {
    database = await createTestDatabase('sc_test', { empty: true });
    // One connection: a statement prepared by name would stay on it.
    db = await openDatabase({ url: database.url, dataDir: tmpdir(), poolSize: 1, namedStatements: false });
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  test("Prisma's statements and the list reads run unnamed: nothing stays prepared", async () => {
    expect(await db.prisma.$queryRaw`SELECT ${21}::int * 2 AS "doubled"`).toEqual([{ doubled: 42 }]);
    expect(await db.prisma.$queryRaw`SELECT ${5}::int * 2 AS "doubled"`).toEqual([{ doubled: 10 }]);
    const text = 'SELECT $1::int + 1 AS "next"';
    expect(await db.raw.queryArrays(text, [1])).toEqual([[2]]);
    expect(await db.raw.queryArrays(text, [41])).toEqual([[42]]);
    expect(await db.raw.query('SELECT "name" FROM pg_prepared_statements')).toEqual([]);
  });
});
