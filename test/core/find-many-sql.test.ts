// The one-statement findMany (server/fast-paths/find-many-sql.ts) against Prisma's own findMany on
// the same rows, on both engines: every selection it takes returns what Prisma returns, page by
// page, and every selection it cannot take is left to Prisma.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type FindMany, compileFindMany, utcFromText } from '../../server/fast-paths/find-many-sql';
import { type TestApp, startTestApp } from '../support/app';

const ORDER = [{ createdAt: 'desc' }, { id: 'desc' }] as const;

test('the schema keeps what the statement relies on: model and field names as table and column names, relations to ids, timestamp(3) dates', () => {
  const schema = readFileSync(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8');
  expect(schema).not.toMatch(/@@?map\(/);
  expect(schema).not.toMatch(/@db\.(Timestamptz|Date|Time)\b/);
  const references = [...schema.matchAll(/references:\s*\[([^\]]*)\]/g)].map((m) => m[1]);
  expect(references.length).toBeGreaterThan(10);
  expect(new Set(references)).toEqual(new Set(['id']));
});

test('a selection beyond scalars and to-one relations, a backward page, a non-equality filter or an order on a nullable field is left to Prisma', () => {
  const find = (query: Record<string, unknown>, more: Partial<FindMany> = {}) =>
    compileFindMany('Session', { where: { accountId: 'a' }, orderBy: ORDER, query, ...more });
  expect(find({ include: { project: true } })).not.toBeNull();
  // An undefined filter filters nothing, as in Prisma.
  const unfiltered = find({}, { where: { accountId: 'a', status: undefined } });
  expect(unfiltered?.values).toEqual(['a']);
  expect(unfiltered?.text).toMatch(/WHERE t0."accountId" = \$1 ORDER BY/);
  expect(find({ include: { reloads: true } })).toBeNull(); // to-many
  expect(find({ include: { llmUsage: true } })).toBeNull(); // BigInt columns
  expect(find({ include: { _count: true } })).toBeNull();
  expect(find({ include: { project: { include: { sessions: true } } } })).toBeNull();
  expect(find({ include: { project: { where: { name: 'x' } } } })).toBeNull();
  expect(find({ select: { id: true }, include: { project: true } })).toBeNull();
  expect(find({ take: -3 })).toBeNull();
  expect(find({ distinct: ['status'] })).toBeNull();
  expect(find({}, { where: { accountId: { in: ['a'] } } as never })).toBeNull();
  expect(find({}, { orderBy: [{ startedAt: 'desc' }] })).toBeNull();
  expect(find({ cursor: { branchName: 'x' }, skip: 1 })).toBeNull(); // not unique
  expect(compileFindMany('Nope', { where: {}, orderBy: [], query: {} })).toBeNull();
});

for (const db of ['postgres', 'pglite'] as const) {
  describe(`the one-statement findMany on ${db}`, () => {
    let t: TestApp;
    let accountId: string;
    let sessionIds: string[];

    beforeAll(async () => {
      t = await startTestApp({ db });
      const prisma = t.app.services.db;
      const admin = await prisma.user.findFirstOrThrow({ where: { email: 'admin@localhost' } });
      accountId = admin.accountId;
      const project = await prisma.project.create({
        data: {
          accountId,
          name: 'rows',
          repositoryUrl: 'https://example.test/rows.git',
          gitCredentialEnc: 'x',
        },
      });
      const template = await prisma.template.create({
        data: { projectId: project.id, slug: 'default', name: 'Default', warnings: ['clamped cpu', 'é ü'] },
      });
      const bare = await prisma.template.create({
        data: { projectId: project.id, slug: 'bare', name: 'Bare' },
      });
      // Milliseconds of every precision PostgreSQL prints (".1", ".12", ".123", none), and three
      // sessions created at the same instant, which only the id orders.
      const base = Date.UTC(2026, 11, 4, 12, 0, 0);
      const createdAt = [0, 100, 120, 123, 5_000, 5_000, 5_000, 9_999, 60_001, 86_400_000];
      sessionIds = [];
      for (const [i, offset] of createdAt.entries()) {
        const id = randomUUID();
        sessionIds.push(id);
        await prisma.session.create({
          data: {
            id,
            accountId,
            projectId: project.id,
            templateId: i % 3 === 0 ? null : i % 3 === 1 ? template.id : bare.id,
            status: i % 2 === 0 ? 'RUNNING' : 'STOPPED',
            stopReason: i % 2 === 0 ? null : 'USER',
            branchName: id,
            baseRef: 'main',
            prompt: i === 4 ? 'line one\nline "two"' : null,
            createdAt: new Date(base - offset),
            startedAt: i === 5 ? new Date(base + 1) : null,
            ...(i % 4 === 3
              ? {}
              : {
                  sandbox: {
                    create: {
                      accountId,
                      provider: i % 2 === 0 ? 'LOCAL' : 'E2B',
                      status: 'STARTED',
                      cpu: 2,
                      memoryGiB: 4,
                      diskGiB: 20,
                      warnings: i === 1 ? ['a', 'b'] : [],
                      runningSeconds: 1.5 * i,
                      runningSince: i === 2 ? new Date(base + 12) : null,
                      runtimeState: 'IDLE',
                    },
                  },
                }),
          },
        });
        if (i % 4 === 0) {
          const sandbox = await prisma.sandbox.findUniqueOrThrow({ where: { sessionId: id } });
          await prisma.executionLease.create({
            data: {
              sessionId: id,
              sandboxId: sandbox.id,
              expiresAt: new Date(base + 60_000),
              releasedAt: i === 4 ? new Date(base + 30_000) : null,
            },
          });
        }
      }
      // Another account's session: the tenancy filter keeps it out.
      const other = await prisma.account.create({ data: { name: 'other' } });
      const otherProject = await prisma.project.create({
        data: { accountId: other.id, name: 'theirs', repositoryUrl: 'https://example.test/theirs.git' },
      });
      const otherId = randomUUID();
      await prisma.session.create({
        data: {
          id: otherId,
          accountId: other.id,
          projectId: otherProject.id,
          branchName: otherId,
          baseRef: 'main',
          createdAt: new Date(base - 5_000),
        },
      });
    });
    afterAll(async () => t?.stop());

    /** Both ways, with the statement's run counted: it must be one statement. */
    async function both(query: Record<string, unknown>, where: FindMany['where'] = { accountId }) {
      const compiled = compileFindMany('Session', { where, orderBy: ORDER, query });
      if (!compiled) throw new Error(`did not compile: ${JSON.stringify(query)}`);
      const stats = t.app.services.database.stats;
      stats.log = [];
      const ours = await compiled.run(t.app.services.database.raw);
      const statements = stats.log.filter((s) => s.sql === compiled.text).length;
      stats.log = null;
      const prisma = await t.app.services.db.session.findMany({
        ...query,
        where,
        orderBy: [...ORDER],
      } as never);
      return { ours, prisma: prisma as unknown as Record<string, unknown>[], statements };
    }

    test('every scalar and four to-one relations, present and missing, as Prisma returns them', async () => {
      const { ours, prisma, statements } = await both({
        include: { project: true, template: true, sandbox: true, lease: true },
      });
      expect(statements).toBe(1);
      expect(ours).toHaveLength(sessionIds.length);
      expect(ours).toEqual(prisma);
      // The cases the seed set up are really there.
      expect(ours.filter((s) => s.template === null)).not.toHaveLength(0);
      expect(ours.filter((s) => s.sandbox === null)).not.toHaveLength(0);
      expect(ours.filter((s) => s.lease !== null)).not.toHaveLength(0);
      expect(ours.map((s) => s.createdAt)).toContainEqual(new Date(Date.UTC(2026, 11, 4, 11, 59, 59, 877)));
      expect(ours.every((s) => s.createdAt instanceof Date)).toBe(true);
    });

    test('a select of some scalars and nested selections', async () => {
      const { ours, prisma } = await both({
        select: {
          id: true,
          status: true,
          createdAt: true,
          startedAt: true,
          prompt: true,
          project: { select: { name: true } },
          template: { select: { slug: true, warnings: true } },
          sandbox: { select: { warnings: true, runningSeconds: true, runningSince: true, lease: true } },
        },
      });
      expect(ours).toEqual(prisma);
      expect(Object.keys(ours[0]!).sort()).toEqual(
        ['createdAt', 'id', 'project', 'prompt', 'sandbox', 'startedAt', 'status', 'template'].sort(),
      );
    });

    test('nested includes and an equality filter', async () => {
      const { ours, prisma } = await both(
        { include: { sandbox: { include: { lease: true } }, template: { select: { slug: true } } } },
        { accountId, status: 'STOPPED' },
      );
      expect(ours.length).toBeGreaterThan(0);
      expect(ours.every((s) => s.status === 'STOPPED')).toBe(true);
      expect(ours).toEqual(prisma);
    });

    test('pages through a cursor as Prisma does, ties on createdAt included', async () => {
      for (const size of [1, 2, 3, 4]) {
        let cursor: string | undefined;
        const seen: string[] = [];
        for (;;) {
          const query = cursor ? { take: size, skip: 1, cursor: { id: cursor } } : { take: size, skip: 0 };
          const { ours, prisma } = await both({ ...query, include: { lease: true } });
          expect(ours).toEqual(prisma);
          if (ours.length === 0) break;
          seen.push(...ours.map((s) => s.id as string));
          cursor = seen.at(-1);
        }
        expect(seen).toHaveLength(sessionIds.length);
        expect(new Set(seen).size).toBe(sessionIds.length);
      }
      // Without skip the cursor row starts the page; an unknown cursor gives what Prisma gives.
      const at = await both({ take: 3, cursor: { id: sessionIds[5] } });
      expect(at.ours).toEqual(at.prisma);
      expect(at.ours[0]!.id).toBe(sessionIds[5]);
      const unknown = await both({ take: 3, skip: 1, cursor: { id: randomUUID() } });
      expect(unknown.ours).toEqual(unknown.prisma);
    });

    test("the dates' text reads as the instants PostgreSQL stores, every precision and far years included", async () => {
      const stamps = [
        '2026-12-04 12:55:21',
        '2026-12-04 12:55:21.1',
        '2026-12-04 12:55:21.12',
        '2026-12-04 12:55:21.123',
        '1970-01-01 00:00:00',
        '1969-12-31 23:59:59.999',
        '2024-02-29 23:59:59.5',
        '0099-06-01 10:00:00.5',
        '0001-01-01 00:00:00',
        '12026-03-01 08:00:00.25',
      ];
      const rows = await t.app.services.database.raw.queryArrays(
        'SELECT s::text, (extract(epoch from s) * 1000)::float8 FROM unnest($1::timestamp(3)[]) s',
        [stamps],
      );
      expect(rows).toHaveLength(stamps.length);
      for (const [text, epochMs] of rows as [string, number][]) {
        expect(utcFromText(text).getTime(), text).toBe(epochMs);
      }
      expect(() => utcFromText('0044-03-15 12:00:00 BC')).toThrow(/ISO form/);
    });
  });
}
