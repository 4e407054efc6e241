// Pins the SQL a sessions page costs (no N+1): the statement count does not grow with page size.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SessionsDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';

for (const db of ['postgres', 'pglite'] as const) {
  describe(`a sessions page on ${db}`, () => {
    let t: TestApp;
    const repo = createTestRepo();

    beforeAll(async () => {
      t = await startTestApp({ db });
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

    /**
     * The page's own statements: the fewest over three requests, since the server's background
     * loops (reaper, reconciler, job queue) share the counter and can only add to a window.
     */
    async function statementsFor(first: number): Promise<{ statements: number; log: string[] }> {
      let best: { statements: number; log: string[] } | null = null;
      for (let attempt = 0; attempt < 3; attempt++) {
        const measured = await measure(first);
        if (!best || measured.statements < best.statements) best = measured;
      }
      return best!;
    }

    async function measure(first: number): Promise<{ statements: number; log: string[] }> {
      await t.request(SessionsDocument, { first }); // authenticates and caches the token
      const stats = t.app.services.database.stats;
      stats.log = [];
      const before = stats.statements;
      const res = await t.request(SessionsDocument, { first });
      const statements = stats.statements - before;
      const log = stats.log;
      stats.log = null;
      expect(res.errors).toBeUndefined();
      const edges = res.data?.sessions.edges ?? [];
      expect(edges).toHaveLength(first);
      for (const { node } of edges) {
        expect(node.project.name).toBe('page');
        expect(node.template?.slug).toBe('default');
        expect(node.sandbox?.status).toBe('STARTED');
        expect(node.lease?.generation).toBe(1);
      }
      return { statements, log };
    }

    test('with project, template, sandbox and lease costs at most 4 statements, whatever the page size', async () => {
      const small = await statementsFor(2);
      const large = await statementsFor(25);
      expect(large.statements).toBeLessThanOrEqual(4);
      expect(large.statements).toBe(small.statements);
      // No statement per row: every statement reads the page as a whole.
      expect(large.log.every((sql) => !/WHERE .*"id" = \$1 LIMIT/.test(sql))).toBe(true);
    });
  });
}
