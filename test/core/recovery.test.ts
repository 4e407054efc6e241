import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseId } from '../../resolvers/ids';
import { JOBS } from '../../resolvers/jobs/queue';
import { createRecovery } from '../../resolvers/sessions/recovery';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestClock } from '../support/clock';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

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

test("the app's recovery keeps to real time: a server clock moved ahead does not fail a session Prisma just stamped", async () => {
  // Session.updatedAt is Prisma's stamp (real time); the recovery's cutoffs compare with it.
  const clock = createTestClock();
  const moved = await startTestApp({ now: clock.now });
  try {
    clock.advance(20 * 60_000);
    const db = moved.app.services.db;
    const { accountId } = await moved.seedAccount({ tier: 'FREE' });
    const project = await db.project.create({
      data: { accountId, name: 'moved', repositoryUrl: '/nowhere' },
    });
    const session = await db.session.create({
      data: { accountId, projectId: project.id, branchName: 'x', baseRef: 'main', status: 'PROVISIONING' },
    });
    const { failed } = await moved.app.services.recovery.sweepDetailed();
    expect(failed).not.toContain(session.id);
    expect((await db.session.findUniqueOrThrow({ where: { id: session.id } })).status).toBe('PROVISIONING');
  } finally {
    await moved.stop();
  }
});

describe('a session whose creating process stopped before cutting its branch', () => {
  let app: TestApp;
  const repo = createTestRepo({ 'README.md': '# resumed\n' });
  let projectId: string;

  beforeAll(async () => {
    app = await startTestApp({
      env: { SINGULACOMP_PROVISIONING_RESUME_MS: '500', SINGULACOMP_RECOVERY_INTERVAL_MS: '200' },
    });
    const created = await app.request(CreateProjectDocument, {
      input: { name: 'resumed', repositoryUrl: repo.url },
    });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    projectId = parseId(created.data.createProject.project.id, 'Project', ['projectId']);
  });
  afterAll(async () => app?.stop());

  test('is resumed by the sweep, whose job cuts the branch from the recorded base, and runs', async () => {
    const db = app.app.services.db;
    const project = await db.project.findUniqueOrThrow({ where: { id: projectId } });
    const base = repo.head();
    // What admission writes before the branch cut: a PROVISIONING row with its base commit. The
    // process stops here (or, under load, is still waiting on its push when the sweep comes).
    const id = randomUUID();
    await db.session.create({
      data: {
        id,
        accountId: project.accountId,
        projectId,
        status: 'PROVISIONING',
        branchName: id,
        baseRef: 'main',
        baseCommit: base,
        prompt: 'resume me',
        turnLedgerId: randomUUID(),
      },
    });
    expect(repo.branches()[id]).toBeUndefined();

    const settled = await waitFor(
      async () => {
        const row = await db.session.findUniqueOrThrow({ where: { id } });
        return row.status === 'PROVISIONING' ? null : row;
      },
      60_000,
      'the resumed session leaving PROVISIONING',
    );
    expect(settled).toMatchObject({ status: 'RUNNING', failureReason: null });
    expect(repo.branches()[id]).toBe(base);
    expect(await db.sandbox.count({ where: { sessionId: id } })).toBe(1);
    // The job is recorded as completed just after the session it provisioned is RUNNING.
    const history = await waitFor(
      async () => {
        const jobs = await app.app.services.jobs.history(JOBS.provision, id);
        return jobs.some((j) => j.state === 'completed') ? jobs : null;
      },
      { what: 'the provisioning job to complete' },
    );
    expect(history).toHaveLength(1);
  });
});
