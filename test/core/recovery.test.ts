import { afterAll, beforeAll, expect, test } from 'vitest';
import { createRecovery } from '../../resolvers/sessions/recovery';
import { type TestApp, startTestApp } from '../support/app';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.stop());

async function seedSession(status: 'PROVISIONING' | 'RUNNING', ageMs: number) {
  const db = t.app.services.db;
  const { accountId } = await t.seedAccount({ tier: 'FREE' });
  const project = await db.project.create({
    data: { accountId, name: `p-${Math.random()}`, repositoryUrl: '/nowhere' },
  });
  const session = await db.session.create({
    data: { accountId, projectId: project.id, branchName: 'x', baseRef: 'main', status },
  });
  await t.app.services.database.raw.query(`UPDATE "Session" SET "updatedAt" = $1 WHERE id = $2::uuid`, [
    new Date(Date.now() - ageMs),
    session.id,
  ]);
  return session.id;
}

test('a session left in PROVISIONING past the timeout is failed with a reason and frees its slot', async () => {
  const stale = await seedSession('PROVISIONING', 20 * 60_000);
  const fresh = await seedSession('PROVISIONING', 1_000);
  const running = await seedSession('RUNNING', 20 * 60_000);
  const recovery = createRecovery({
    db: t.app.services.db,
    sessions: t.app.services.sessions,
    logger: t.app.services.logger,
    provisioningTimeoutMs: 10 * 60_000,
  });
  const failed = await recovery.sweep();
  expect(failed).toContain(stale);
  expect(failed).not.toContain(fresh);
  expect(failed).not.toContain(running);
  const rows = await t.app.services.db.session.findMany({ where: { id: { in: [stale, fresh, running] } } });
  const byId = new Map(rows.map((r) => [r.id, r]));
  expect(byId.get(stale)?.status).toBe('FAILED');
  expect(byId.get(stale)?.failureReason).toMatch(/did not finish within 600 s/);
  expect(byId.get(fresh)?.status).toBe('PROVISIONING');
  expect(byId.get(running)?.status).toBe('RUNNING');
  // A second sweep finds nothing more to do.
  expect(await recovery.sweep()).not.toContain(stale);
});
