// The nested sessions page that bench/api.ts times and bench/profile-page.ts profiles: the query,
// an instant provider for the app, and the seed (sessions with template, sandbox and lease).
import { randomUUID } from 'node:crypto';
import type { SandboxProvider } from '../../resolvers/providers/types';
import type { TestApp } from '../../test/support/app';

export const SESSIONS_PAGE = `query Page($first: Int) {
  sessions(first: $first) {
    edges { cursor node {
      id sessionId status branchName baseRef createdAt
      project { id name defaultBranch }
      template { id slug cpu memoryGiB diskGiB }
      sandbox { id status provider cpu memoryGiB diskGiB }
      lease { generation expiresAt releasedAt }
    } }
    pageInfo { hasNextPage endCursor }
  }
}`;

/**
 * Boots instantly: createSession's own work (auth, validation, ref resolution, the locked limit
 * check, the insert, the branch cut) is what is measured, not background provisioning.
 */
export function instantProvider(): SandboxProvider {
  return {
    name: 'LOCAL',
    create: async (r) => ({
      providerSandboxId: `instant-${r.sandboxId}`,
      state: 'STARTED',
      serviceUrl: null,
    }),
    start: async (id) => ({ providerSandboxId: id, state: 'STARTED', serviceUrl: null }),
    stop: async (id) => ({ providerSandboxId: id, state: 'STOPPED', serviceUrl: null }),
    destroy: async () => {},
    keepAlive: async () => {},
    status: async () => 'STARTED',
  };
}

/** Seeds `rows` sessions of one project of the admin's account, each with template, sandbox and lease. */
export async function seedSessionsPage(t: TestApp, repositoryUrl: string, rows: number) {
  const db = t.app.services.db;
  const account = await db.user.findFirstOrThrow({ where: { email: 'admin@localhost' } });
  const project = await db.project.create({
    data: { accountId: account.accountId, name: 'bench', repositoryUrl },
  });
  const template = await db.template.create({
    data: { projectId: project.id, slug: 'default', name: 'Default', isDefault: true },
  });
  const now = Date.now();
  const seeded = Array.from({ length: rows }, (_, i) => ({
    sessionId: randomUUID(),
    sandboxId: randomUUID(),
    createdAt: new Date(now - i * 1_000),
  }));
  await db.session.createMany({
    data: seeded.map((s) => ({
      id: s.sessionId,
      accountId: account.accountId,
      projectId: project.id,
      templateId: template.id,
      status: 'RUNNING' as const,
      branchName: s.sessionId,
      baseRef: 'main',
      createdAt: s.createdAt,
    })),
  });
  await db.sandbox.createMany({
    data: seeded.map((s) => ({
      id: s.sandboxId,
      sessionId: s.sessionId,
      accountId: account.accountId,
      provider: 'LOCAL' as const,
      status: 'STARTED' as const,
      cpu: 2,
      memoryGiB: 4,
      diskGiB: 20,
    })),
  });
  await db.executionLease.createMany({
    data: seeded.map((s) => ({
      sessionId: s.sessionId,
      sandboxId: s.sandboxId,
      expiresAt: new Date(now + 180_000),
    })),
  });
  return { accountId: account.accountId, projectId: project.id };
}
