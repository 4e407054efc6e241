// The reconciler's cloud sweep, per provider through its real SDK against its emulator: sandboxes
// tagged with this installation's id that no live session owns are destroyed once they have looked
// orphaned for the grace period; a live session's sandbox, one whose create may still be in flight,
// and sandboxes of another installation (or untagged) are left alone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DestroyedOrphan } from '../../resolvers/sessions/reconciler';
import { DAYTONA_TIER_1 } from '../emulators/daytona';
import { fakeDaemonCommand } from '../emulators/harness';
import { sandboxRequest } from '../emulators/request';
import { CreateSessionDocument, ProviderCreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestClock } from '../support/clock';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type EmulatedProvider, EMULATORS } from './fixtures';

const GRACE_MS = 60_000;
const CREATE_GRACE_MS = 900_000;

for (const name of ['DAYTONA', 'E2B', 'PLATINUM'] as const) {
  describe(`orphaned ${name} sandboxes`, () => {
    const repo = createTestRepo({ 'README.md': '# orphans\n' });
    const clock = createTestClock();
    let dir: string;
    let emulated: EmulatedProvider;
    let t: TestApp;
    let projectId: string;
    const foreign: string[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sc-orphans-'));
      // Six sandboxes at once: more than Daytona's Tier 1 totals allow.
      emulated = await EMULATORS[name]({
        entryCommand: fakeDaemonCommand(dir),
        daytona: { tier: { ...DAYTONA_TIER_1, totalCpu: 100, totalMemoryGiB: 100, totalDiskGiB: 300 } },
      });
      t = await startTestApp({
        providers: [emulated.provider],
        now: clock.now,
        // Passes are run by the test, not by the timer.
        env: {
          LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent',
          SINGULACOMP_RECONCILE_INTERVAL_MS: '3600000',
          SINGULACOMP_ORPHAN_GRACE_MS: String(GRACE_MS),
        },
      });
      const created = await t.request(ProviderCreateProjectDocument, {
        input: { name: `orphans-${name.toLowerCase()}`, repositoryUrl: repo.url, provider: name },
      });
      if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
        throw new Error(JSON.stringify(created));
      projectId = created.data.createProject.project.id;
    });

    afterAll(async () => {
      for (const id of foreign) await emulated?.provider.destroy(id).catch(() => undefined);
      const live = await t?.app.services.db.session.findMany({
        where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
      });
      for (const s of live ?? []) await t.app.services.sessions.stopInternal(s.id, 'USER');
      await t?.stop();
      await emulated?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** A RUNNING session through GraphQL; its Sandbox row id and provider sandbox id. */
    async function runningSession() {
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      const payload = res.data?.createSession;
      if (payload?.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const sessionId = payload.session.sessionId;
      const sandbox = await waitFor(async () => {
        const row = await t.app.services.db.session.findUniqueOrThrow({
          where: { id: sessionId },
          include: { sandbox: true },
        });
        if (row.status === 'FAILED') throw new Error(`session failed: ${row.failureReason}`);
        return row.status === 'RUNNING' ? row.sandbox : null;
      }, 60_000);
      if (!sandbox?.providerSandboxId) throw new Error('no provider sandbox');
      return { sessionId, sandboxId: sandbox.id, providerSandboxId: sandbox.providerSandboxId };
    }

    const destroyedIds = (orphans: DestroyedOrphan[]) => orphans.map((o) => o.providerSandboxId).sort();

    test('destroys sandboxes whose row is gone or whose session ended once the grace passed, and leaves live, in-flight and foreign ones alone', async () => {
      const installationId = await t.app.services.installation.id();
      const live = await runningSession();
      const rowGone = await runningSession();
      const stopped = await runningSession();
      const inFlight = await runningSession();
      // Another installation's sandbox and an untagged one on the same provider account.
      const other = await emulated.provider.create({
        ...sandboxRequest(),
        installationId: 'another-installation',
      });
      const untagged = await emulated.provider.create(sandboxRequest());
      foreign.push(other.providerSandboxId, untagged.providerSandboxId);
      const ours = [live, rowGone, stopped, inFlight].map((s) => s.providerSandboxId);
      expect(emulated.list().sort()).toEqual(
        [...ours, other.providerSandboxId, untagged.providerSandboxId].sort(),
      );

      // The provider lists exactly this installation's sandboxes, tagged with their rows.
      const listed = await emulated.provider.listTagged?.(installationId);
      expect(listed?.map((s) => s.providerSandboxId).sort()).toEqual([...ours].sort());
      expect(listed?.find((s) => s.providerSandboxId === live.providerSandboxId)).toMatchObject({
        sandboxId: live.sandboxId,
        sessionId: live.sessionId,
        state: 'STARTED',
      });

      const sql = t.app.services.db;
      // The row is gone (its session was deleted with everything under it, say).
      await sql.sandbox.delete({ where: { id: rowGone.sandboxId } });
      // A teardown that never ran: the session is stopped in the database only.
      await sql.session.update({
        where: { id: stopped.sessionId },
        data: { status: 'STOPPED', stopReason: 'USER' },
      });
      // Stopped while its create is still in flight: the row has no provider id yet.
      await sql.sandbox.update({
        where: { id: inFlight.sandboxId },
        data: { status: 'CREATING', providerSandboxId: null },
      });
      await sql.session.update({
        where: { id: inFlight.sessionId },
        data: { status: 'STOPPED', stopReason: 'USER' },
      });

      clock.freeze();
      const reconciler = t.app.services.reconciler;
      // Seen orphaned for the first time: nothing is destroyed before the grace period.
      expect((await reconciler.reconcile()).destroyedCloudOrphans).toEqual([]);
      clock.advance(GRACE_MS - 1_000);
      expect((await reconciler.reconcile()).destroyedCloudOrphans).toEqual([]);
      expect(emulated.list()).toHaveLength(6);

      clock.advance(1_000);
      const second = (await reconciler.reconcile()).destroyedCloudOrphans;
      expect(destroyedIds(second)).toEqual([rowGone.providerSandboxId, stopped.providerSandboxId].sort());
      expect(second.find((o) => o.providerSandboxId === rowGone.providerSandboxId)).toMatchObject({
        provider: name,
        sandboxId: rowGone.sandboxId,
        sessionId: rowGone.sessionId,
        reason: 'its Sandbox row is gone',
      });
      expect(second.find((o) => o.providerSandboxId === stopped.providerSandboxId)?.reason).toBe(
        'its session is STOPPED',
      );
      expect(emulated.list().sort()).toEqual(
        [
          live.providerSandboxId,
          inFlight.providerSandboxId,
          other.providerSandboxId,
          untagged.providerSandboxId,
        ].sort(),
      );
      // The stopped session's row records the end.
      expect((await sql.sandbox.findUniqueOrThrow({ where: { id: stopped.sandboxId } })).status).toBe(
        'DESTROYED',
      );

      // A row still CREATING protects its sandbox until the create grace has passed.
      clock.advance(CREATE_GRACE_MS - GRACE_MS - 1_000);
      expect((await reconciler.reconcile()).destroyedCloudOrphans).toEqual([]);
      clock.advance(1_000);
      expect((await reconciler.reconcile()).destroyedCloudOrphans).toEqual([]);
      clock.advance(GRACE_MS);
      expect(destroyedIds((await reconciler.reconcile()).destroyedCloudOrphans)).toEqual([
        inFlight.providerSandboxId,
      ]);

      // The live session's sandbox and the foreign ones are still running.
      expect(emulated.list().sort()).toEqual(
        [live.providerSandboxId, other.providerSandboxId, untagged.providerSandboxId].sort(),
      );
      expect(emulated.nativeState(live.providerSandboxId)).toBe(name === 'DAYTONA' ? 'started' : 'running');
      expect((await sql.session.findUniqueOrThrow({ where: { id: live.sessionId } })).status).toBe('RUNNING');
    });

    test('a running session whose sandbox was stopped at the provider, not by us, is stopped with PROVIDER and its sandbox destroyed', async () => {
      const running = await runningSession();
      const halted = await runningSession();
      // Stopped from the provider's console (E2B has no stop: its pause is what the adapter does).
      await emulated.provider.stop(halted.providerSandboxId);
      expect(await emulated.provider.status(halted.providerSandboxId)).toBe(
        name === 'E2B' ? 'HIBERNATED' : 'STOPPED',
      );

      const pass = await t.app.services.reconciler.reconcile();
      expect(pass.ended).toEqual([halted.sessionId]);
      const sql = t.app.services.db;
      const session = await sql.session.findUniqueOrThrow({
        where: { id: halted.sessionId },
        include: { sandbox: true },
      });
      expect(session).toMatchObject({ status: 'STOPPED', stopReason: 'PROVIDER' });
      expect(session.sandbox).toMatchObject({
        status: 'DESTROYED',
        stopReason: 'PROVIDER',
        runningSince: null,
      });
      expect(emulated.list()).not.toContain(halted.providerSandboxId);
      // The other running session and its sandbox are untouched, and a second pass changes nothing.
      expect((await t.app.services.reconciler.reconcile()).ended).toEqual([]);
      expect((await sql.session.findUniqueOrThrow({ where: { id: running.sessionId } })).status).toBe(
        'RUNNING',
      );
      expect(emulated.nativeState(running.providerSandboxId)).toBe(
        name === 'DAYTONA' ? 'started' : 'running',
      );
    });
  });
}
