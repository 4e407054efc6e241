// The idle reaper runs as the `idle-reaper` job: each process enqueues a tick every interval, the
// queue keeps one tick queued or running across the fleet, and the tick stops idle sessions.
// Checked on PostgreSQL and on the embedded PGlite.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JOBS } from '../../resolvers/jobs/queue';
import { type TestApp, startTestApp } from '../support/app';
import { type TestProject, createTestProject, createTestSession } from '../support/fixtures';
import { waitFor } from '../support/wait';

for (const db of ['postgres', 'pglite'] as const) {
  describe(`the reaper as a job (${db})`, () => {
    let t: TestApp;
    let project: TestProject;

    beforeAll(async () => {
      t = await startTestApp({
        db,
        env: { SINGULACOMP_IDLE_TIMEOUT_MS: '1000', SINGULACOMP_REAPER_INTERVAL_MS: '300' },
      });
      project = await createTestProject(t, `reaper-job-${db}`);
    });
    afterAll(async () => t?.stop());

    test('an idle session is stopped IDLE_REAPED by a completed idle-reaper job; ticks never overlap', async () => {
      const session = await createTestSession(t, project.id);
      const stopped = await waitFor(async () => {
        const row = await t.app.services.db.session.findUniqueOrThrow({ where: { id: session.sessionId } });
        return row.status === 'STOPPED' ? row : null;
      }, 60_000);
      expect(stopped.stopReason).toBe('IDLE_REAPED');
      const { boss } = t.app.services.jobs;
      // The tick that stopped it completes and reports it.
      const jobs = await waitFor(async () => {
        const all = await boss.findJobs(JOBS.reaper);
        const reported = all.some(
          (j) => j.state === 'completed' && JSON.stringify(j.output).includes(session.sessionId),
        );
        return reported ? all : null;
      }, 30_000);
      // At most one tick queued or running, and the finished ones ran one after another.
      expect(jobs.filter((j) => j.state === 'created' || j.state === 'active').length).toBeLessThanOrEqual(1);
      const spans = jobs
        .filter((j) => j.state === 'completed')
        .map((j) => [j.startedOn.getTime(), j.completedOn?.getTime() ?? Number.POSITIVE_INFINITY] as const)
        .sort((a, b) => a[0] - b[0]);
      expect(spans.length).toBeGreaterThan(0);
      for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    });
  });
}
