// RUNNING means the sandbox is up; agentReady says the agent can take a turn. The session's
// watchers hear each change of it, and every event shows the session as of that event, live and
// replayed, consistent with the mutation that caused it. On both database engines.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  ReportRuntimeStateDocument,
  SessionReadinessDocument,
  type SessionStateFragment,
  SessionStatesDocument,
  StopSessionStateDocument,
} from '../generated/graphql';
import { createProject, startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { openSocket, watch } from './helpers';

/** What an event froze, without ids. */
const state = (s: SessionStateFragment) => ({
  status: s.status,
  seq: s.seq,
  runtimeState: s.runtimeState,
  agentReady: s.agentReady,
  sandbox: s.sandbox ? { status: s.sandbox.status, runtimeState: s.sandbox.runtimeState } : null,
});

for (const db of ['postgres', 'pglite'] as const) {
  describe(`session readiness on ${db}`, () => {
    let t: TestApp;
    let projectId: string;
    const repo = createTestRepo({ 'README.md': '# readiness\n' });

    beforeAll(async () => {
      t = await startTestApp({ db });
      projectId = await createProject(t, repo.url);
    }, 300_000);
    afterAll(async () => t?.stop());

    test('a RUNNING session is agentReady only once OpenCode is reported healthy, and its events replay as they were', async () => {
      const s = await startSession(t, projectId);
      const view = await t.request(SessionReadinessDocument, { id: s.sessionId });
      expect(view.data?.session).toMatchObject({ status: 'RUNNING', runtimeState: null, agentReady: false });

      const socket = openSocket(t.wsUrl, t.adminToken);
      try {
        const live = watch(socket, SessionStatesDocument, { id: s.sessionId, after: 0 });
        const report = async (runtimeState: 'STARTING' | 'HEALTHY') => {
          const res = await t.request(
            ReportRuntimeStateDocument,
            { input: { sessionId: s.sessionId, state: runtimeState } },
            s.token,
          );
          expect(res.data?.reportRuntimeState.__typename).toBe('ReportRuntimeStateSuccess');
        };
        /** Runs `action`, then waits for the event it caused (counted before it ran). */
        const eventOf = async (action: () => Promise<unknown>) => {
          const before = live.events.length;
          await action();
          await live.waitForEvents(before + 1);
          return live.events.at(-1)!.data.sessionUpdated;
        };

        // Everything up to RUNNING replays first; wait for it before reporting.
        const upToRunning = await live.waitForEvents(1);
        expect(upToRunning[0]!.data.sessionUpdated).toMatchObject({ status: 'PROVISIONING', sandbox: null });
        await expect
          .poll(() => live.events.some((e) => e.data.sessionUpdated.status === 'RUNNING'), {
            timeout: 20_000,
          })
          .toBe(true);

        expect(state(await eventOf(() => report('STARTING')))).toMatchObject({
          status: 'RUNNING',
          runtimeState: 'STARTING',
          agentReady: false,
          sandbox: { status: 'STARTED', runtimeState: 'STARTING' },
        });
        expect(state(await eventOf(() => report('HEALTHY')))).toMatchObject({
          status: 'RUNNING',
          runtimeState: 'HEALTHY',
          agentReady: true,
        });
        const ready = await t.request(SessionReadinessDocument, { id: s.sessionId });
        expect(ready.data?.session).toMatchObject({ runtimeState: 'HEALTHY', agentReady: true });

        let stop: Awaited<ReturnType<typeof stopSession>> | undefined;
        const stopSession = () => t.request(StopSessionStateDocument, { input: { sessionId: s.sessionId } });
        const stoppedEvent = await eventOf(async () => {
          stop = await stopSession();
        });
        if (stop?.data?.stopSession.__typename !== 'StopSessionSuccess')
          throw new Error(JSON.stringify(stop));
        const answered = state(stop.data.stopSession.session);
        expect(answered).toMatchObject({ status: 'STOPPED', agentReady: false, runtimeState: null });
        expect(answered.sandbox?.status).toBe('DESTROYED');
        // The STOPPED event and the mutation's answer describe the same session.
        expect(state(stoppedEvent)).toEqual(answered);

        // A replay after the fact shows each event as it was, not the session as it is now.
        const replay = watch(socket, SessionStatesDocument, { id: s.sessionId, after: 0 });
        const replayed = await replay.waitForEvents(live.events.length);
        expect(replayed.map((e) => state(e.data.sessionUpdated))).toEqual(
          live.events.map((e) => state(e.data.sessionUpdated)),
        );
        expect(replayed.some((e) => e.data.sessionUpdated.agentReady)).toBe(true);
        live.unsubscribe();
        replay.unsubscribe();
      } finally {
        await socket.dispose();
      }
    });
  });
}
