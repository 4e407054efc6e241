// What provisioning keeps of a cloud sandbox beyond its id: the provider's access headers for the
// daemon's URL (Daytona's preview token, encrypted at rest), the spec fitted to the provider's
// documented limits, and the hard expiry the lifetime guard ends sessions ahead of (E2B).
// GraphQL createSession → provisioning → the real SDK → the strict emulator, with the emulators'
// stand-in daemon as the entry.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { createLifetimeGuard, lifetimeWarning } from '../../resolvers/sessions/lifetime-guard';
import { daemonRequestHeaders, storedServiceHeaders } from '../../resolvers/providers/service-access';
import type { DaytonaEmulator } from '../emulators/daytona';
import { fakeDaemonCommand, healthStatus, waitForHealth } from '../emulators/harness';
import {
  CreateSessionDocument,
  ProviderCreateProjectDocument,
  ProviderSessionDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type EmulatedProvider, startDaytona, startE2B } from './fixtures';

function harness(name: 'DAYTONA' | 'E2B') {
  const repo = createTestRepo({ 'README.md': `# ${name} service access\n` });
  const entryDir = mkdtempSync(join(tmpdir(), 'sc-access-entry-'));
  const state = {} as { emulated: EmulatedProvider & { emulator?: unknown }; t: TestApp; projectId: string };

  beforeAll(async () => {
    const entryCommand = fakeDaemonCommand(entryDir);
    state.emulated =
      name === 'DAYTONA' ? await startDaytona({ entryCommand }) : await startE2B({ entryCommand });
    state.t = await startTestApp({ providers: [state.emulated.provider] });
    const created = await state.t.request(ProviderCreateProjectDocument, {
      input: { name: `access-${name.toLowerCase()}`, repositoryUrl: repo.url, provider: name },
    });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    state.projectId = created.data.createProject.project.id;
  });

  afterEach(async () => {
    const live = await state.t.app.services.db.session.findMany({
      where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
    });
    for (const s of live) await state.t.app.services.sessions.stopInternal(s.id, 'USER');
    await state.t.app.services.provisioner.drain();
  });

  afterAll(async () => {
    await state.t?.stop();
    await state.emulated?.close();
    rmSync(entryDir, { recursive: true, force: true });
  });

  async function runningSession() {
    const res = await state.t.request(CreateSessionDocument, { input: { projectId: state.projectId } });
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    const sessionId = res.data.createSession.session.sessionId;
    return waitFor(async () => {
      const read = await state.t.request(ProviderSessionDocument, { id: sessionId });
      const s = read.data?.session;
      if (s?.status === 'FAILED') throw new Error(`session failed: ${s.failureReason}`);
      return s?.status === 'RUNNING' ? s : null;
    }, 60_000);
  }

  return { state, runningSession };
}

describe('a Daytona sandbox as provisioning stores it', () => {
  const { state, runningSession } = harness('DAYTONA');

  test('keeps the preview token encrypted with the sandbox, and only requests carrying it reach the daemon', async () => {
    const session = await runningSession();
    expect(session.sandbox).toMatchObject({ cpu: 2, memoryGiB: 4, diskGiB: 10 });
    // The platform default of 20 GiB disk is above Daytona's default maximum: clamped, and said so.
    expect(session.sandbox?.warnings).toEqual([
      'diskGiB: 20 GiB exceeds the DAYTONA cap of 10; clamped to 10',
    ]);
    const row = await state.t.app.services.db.sandbox.findUniqueOrThrow({
      where: { sessionId: session.sessionId },
    });
    const key = state.t.app.services.keys.encryption;
    const emulator = (state.emulated as { emulator?: DaytonaEmulator }).emulator;
    expect(row.serviceHeadersEnc).not.toBeNull();
    expect(row.serviceHeadersEnc).not.toContain('x-daytona-preview-token');
    const headers = storedServiceHeaders(key, row);
    expect(Object.keys(headers)).toEqual(['x-daytona-preview-token']);
    if (emulator)
      expect(headers['x-daytona-preview-token']).toBe(
        emulator.get(row.providerSandboxId as string)?.previewToken,
      );

    const url = row.serviceUrl as string;
    // Without the token Daytona's proxy redirects to its sign-in page.
    expect(await healthStatus(url)).toBe(307);
    const health = await waitForHealth(url, 10_000, daemonRequestHeaders(key, row, { 'x-test': 'own' }));
    expect(health.sessionId).toBe(session.sessionId);
  });
});

describe('an E2B sandbox as provisioning stores it, and the lifetime guard', () => {
  const { state, runningSession } = harness('E2B');

  test('stores the expiry of the plan’s maximum length, warns the session ahead of it, then stops it cleanly', async () => {
    const session = await runningSession();
    const db = state.t.app.services.db;
    const row = await db.sandbox.findUniqueOrThrow({ where: { sessionId: session.sessionId } });
    expect(row.serviceHeadersEnc).toBeNull();
    const expiresAt = row.expiresAt as Date;
    const startedAt = row.startedAt as Date;
    // Hobby: one hour from the sandbox's start (the adapter's clock and the row's differ by the create).
    expect(Math.abs(expiresAt.getTime() - (startedAt.getTime() + 3_600_000))).toBeLessThan(60_000);

    let clock = expiresAt.getTime() - 30 * 60_000;
    const guard = createLifetimeGuard({
      db,
      events: state.t.app.services.events,
      logger: state.t.app.services.logger,
      stop: (id, reason) => state.t.app.services.sessions.stopInternal(id, reason),
      warnAheadMs: 10 * 60_000,
      stopAheadMs: 2 * 60_000,
      now: () => clock,
    });
    expect(await guard.tick()).toEqual({ warned: [], stopped: [] });

    clock = expiresAt.getTime() - 5 * 60_000;
    expect(await guard.tick()).toEqual({ warned: [session.sessionId], stopped: [] });
    const warned = await db.sandbox.findUniqueOrThrow({ where: { id: row.id } });
    expect(warned.warnings).toContain(lifetimeWarning('E2B', expiresAt));
    expect(await guard.tick()).toEqual({ warned: [], stopped: [] });

    clock = expiresAt.getTime() - 60_000;
    expect(await guard.tick()).toEqual({ warned: [], stopped: [session.sessionId] });
    await state.t.app.services.provisioner.drain();
    const stopped = await db.session.findUniqueOrThrow({ where: { id: session.sessionId } });
    expect(stopped.status).toBe('STOPPED');
    expect(stopped.stopReason).toBe('PROVIDER');
    await waitFor(async () => (state.emulated.list().length === 0 ? true : null), 30_000);
    expect(state.emulated.nativeState(row.providerSandboxId as string)).toBeUndefined();
  });
});
