// Pins the SQL a sessions page costs (no N+1): the statement count does not grow with page size,
// and the page with its to-one relations is one statement, authorization included.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { print } from 'graphql';
import { parseEnv } from '../../server/env';
import { SessionsDocument, type SessionsQuery } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { FAST_PATHS_ENV } from '../support/env';
import { createTestRepo } from '../support/git';

// With SINGULACOMP_FAST_PATHS=off Prisma reads the page: the bounds hold, but not as one statement.
const { fastPaths } = parseEnv(FAST_PATHS_ENV);

for (const db of ['postgres', 'pglite'] as const) {
  describe(`a sessions page on ${db}`, () => {
    let t: TestApp;
    const repo = createTestRepo();

    beforeAll(async () => {
      // The server's clock stands still, so the token the warm-up request caches is still cached
      // for the measured one however slow the machine (beside a second suite, its 5 s cache expired
      // in between and the token lookup was counted with the page).
      const clock = Date.now();
      t = await startTestApp({ db, now: () => clock });
      const prisma = t.app.services.db;
      const admin = await prisma.user.findFirstOrThrow({ where: { email: 'admin@localhost' } });
      const project = await prisma.project.create({
        data: { accountId: admin.accountId, name: 'page', repositoryUrl: repo.url },
      });
      const template = await prisma.template.create({
        data: { projectId: project.id, slug: 'default', name: 'Default', isDefault: true },
      });
      for (let i = 0; i < 30; i++) {
        const id = randomUUID();
        await prisma.session.create({
          data: {
            id,
            accountId: admin.accountId,
            projectId: project.id,
            templateId: template.id,
            status: 'RUNNING',
            branchName: id,
            baseRef: 'main',
            createdAt: new Date(Date.now() - i * 1_000),
            sandbox: {
              create: {
                accountId: admin.accountId,
                provider: 'LOCAL',
                status: 'STARTED',
                cpu: 2,
                memoryGiB: 4,
                diskGiB: 20,
              },
            },
          },
        });
        const sandbox = await prisma.sandbox.findUniqueOrThrow({ where: { sessionId: id } });
        await prisma.executionLease.create({
          data: { sessionId: id, sandboxId: sandbox.id, expiresAt: new Date(Date.now() + 60_000) },
        });
      }
    });
    afterAll(async () => t?.stop());

    /** The statements the server sent for one page request, told apart from its background loops' by request id. */
    async function statementsFor(first: number): Promise<{ statements: number; log: string[] }> {
      await t.request(SessionsDocument, { first }); // authenticates and caches the token
      const stats = t.app.services.database.stats;
      const requestId = randomUUID();
      stats.log = [];
      const res = await t.raw({ query: print(SessionsDocument), variables: { first } }, undefined, {
        'x-request-id': requestId,
      });
      const log = stats.log.filter((s) => s.requestId === requestId).map((s) => s.sql);
      stats.log = null;
      expect(res.headers.get('x-request-id')).toBe(requestId);
      expect(res.errors).toBeUndefined();
      const edges = (res.data as SessionsQuery | null)?.sessions.edges ?? [];
      expect(edges).toHaveLength(first);
      for (const { node } of edges) {
        expect(node.project.name).toBe('page');
        expect(node.template?.slug).toBe('default');
        expect(node.sandbox?.status).toBe('STARTED');
        expect(node.lease?.generation).toBe(1);
      }
      return { statements: log.length, log };
    }

    /** Leaf fields that plan their own columns (`select`), beside the relations they read from. */
    const PLANNED_LEAVES = `query PlannedLeaves($first: Int) {
      sessions(first: $first) { edges { node {
        id status runtimeState agentReady provisioningPhase costUsd
        sandbox { id runtimeState }
      } } }
    }`;

    test('leaf fields with their own select cost no statement per row', async () => {
      const page = async (first: number) => {
        const requestId = randomUUID();
        const stats = t.app.services.database.stats;
        stats.log = [];
        const res = await t.raw({ query: PLANNED_LEAVES, variables: { first } }, undefined, {
          'x-request-id': requestId,
        });
        const log = stats.log.filter((s) => s.requestId === requestId).map((s) => s.sql);
        stats.log = null;
        expect(res.errors).toBeUndefined();
        const nodes = (
          res.data as { sessions: { edges: { node: Record<string, unknown> }[] } }
        ).sessions.edges.map((e) => e.node);
        expect(nodes).toHaveLength(first);
        for (const node of nodes) {
          // RUNNING with no report yet: no runtime state, not ready, no phase; a cost is metered.
          expect(node).toMatchObject({ status: 'RUNNING', runtimeState: null, agentReady: false });
          expect(node.provisioningPhase).toBeNull();
          expect(typeof node.costUsd).toBe('number');
        }
        return log;
      };
      await page(2); // authenticates and caches the token
      const small = await page(2);
      const large = await page(25);
      const both = `page of 2:\n${small.join('\n')}\npage of 25:\n${large.join('\n')}`;
      expect(small.length).toBeGreaterThan(0);
      expect(large.length, both).toBe(small.length);
    });

    test('with project, template, sandbox and lease costs at most 4 statements, whatever the page size', async () => {
      const small = await statementsFor(2);
      const large = await statementsFor(25);
      expect(small.statements).toBeGreaterThan(0);
      // On a failure, the message shows both pages' statements.
      const both = `page of 2:\n${small.log.join('\n')}\npage of 25:\n${large.log.join('\n')}`;
      expect(large.statements, both).toBeLessThanOrEqual(4);
      expect(large.statements, both).toBe(small.statements);
      // No statement per row: every statement reads the page as a whole.
      expect(large.log.every((sql) => !/WHERE .*"id" = \$1 LIMIT/.test(sql))).toBe(true);
      // The page and its four relations are one statement (server/fast-paths/find-many-sql.ts), not
      // Prisma's, and the templates' read check uses the projects it joined: nothing else is read.
      if (fastPaths.findManySql) {
        expect(large.log, both).toEqual([expect.stringMatching(/^SELECT .* FROM "Session" t0 LEFT JOIN /)]);
      }
    });
  });
}
