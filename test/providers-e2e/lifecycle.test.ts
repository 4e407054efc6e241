// Each cloud provider end to end: GraphQL createSession → provisioning through the real SDK →
// the provider emulator → an emulated sandbox running the real daemon; then stop, faults and cost.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { decrypt } from '../../resolvers/auth/crypto';
import { storedServiceHeaders } from '../../resolvers/providers/service-access';
import {
  CreateSessionDocument,
  ProviderCreateProjectDocument,
  ProviderSessionDocument,
  RenewLeaseDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type EmulatedProvider, EMULATORS, type EntryScript, daemonEntry } from './fixtures';

const NATIVE_RUNNING = { DAYTONA: 'started', E2B: 'running', PLATINUM: 'running' } as const;

for (const name of ['DAYTONA', 'E2B', 'PLATINUM'] as const) {
  describe(`sessions on ${name} through its SDK and emulator`, () => {
    const repo = createTestRepo({ 'README.md': '# provider e2e\n' });
    let emulated: EmulatedProvider;
    let entry: EntryScript;
    let t: TestApp;
    let projectId: string;

    async function createSession(): Promise<{ id: string; sessionId: string }> {
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      const payload = res.data?.createSession;
      if (payload?.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      expect(payload.session.status).toBe('PROVISIONING');
      return payload.session;
    }

    const session = async (id: string) => {
      const res = await t.request(ProviderSessionDocument, { id });
      if (!res.data?.session) throw new Error(JSON.stringify(res));
      return res.data.session;
    };

    const settled = (id: string) =>
      waitFor(async () => {
        const s = await session(id);
        return s.status === 'PROVISIONING' ? null : s;
      }, 60_000);

    beforeAll(async () => {
      entry = daemonEntry(repo.url);
      emulated = await EMULATORS[name]({ entryCommand: entry.command });
      t = await startTestApp({ providers: [emulated.provider] });
      const created = await t.request(ProviderCreateProjectDocument, {
        input: { name: `e2e-${name.toLowerCase()}`, repositoryUrl: repo.url, provider: name },
      });
      if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
        throw new Error(JSON.stringify(created));
      expect(created.data.createProject.project.provider).toBe(name);
      projectId = created.data.createProject.project.id;
    });

    // A failed assertion must not leave a live sandbox behind for the next test's list checks.
    afterEach(async () => {
      emulated.clearFaults();
      const live = await t.app.services.db.session.findMany({
        where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
      });
      for (const s of live) await t.app.services.sessions.stopInternal(s.id, 'USER');
      await t.app.services.provisioner.drain();
      for (const id of emulated.list()) await emulated.provider.destroy(id).catch(() => undefined);
    });

    afterAll(async () => {
      await t?.stop();
      await emulated?.close();
      entry?.remove();
    });

    test('a session goes PROVISIONING → RUNNING → STOPPED while its sandbox is STARTED at the provider, runs the real daemon, and is destroyed at the end', async () => {
      const created = await createSession();
      const running = await settled(created.sessionId);
      expect(running.failureReason).toBeNull();
      expect(running.status).toBe('RUNNING');
      expect(running.provisioningPhase).toBeNull();
      const sandbox = running.sandbox;
      // Daytona's documented default maximum disk and E2B Hobby's are 10 GiB: the platform default
      // of 20 is clamped.
      expect(sandbox).toMatchObject({
        status: 'STARTED',
        provider: name,
        cpu: 2,
        memoryGiB: 4,
        diskGiB: name === 'PLATINUM' ? 20 : 10,
      });
      const providerSandboxId = sandbox?.providerSandboxId as string;
      expect(emulated.list()).toEqual([providerSandboxId]);
      expect(emulated.nativeState(providerSandboxId)).toBe(NATIVE_RUNNING[name]);
      // The default image was built through the provider once, and the sandbox boots from it (E2B:
      // a template whose runtime layer installs the runtime with RUN steps, single-stage).
      expect(sandbox?.warnings).toEqual(
        name === 'PLATINUM' ? [] : [`diskGiB: 20 GiB exceeds the ${name} cap of 10; clamped to 10`],
      );
      expect(sandbox?.snapshot).toMatchObject({ status: 'ACTIVE', provider: name });
      expect(emulated.builds()).toBe(1);

      // The entry process is the real daemon: it serves /singulacomp/health on the sandbox's service
      // port with the session id it was booted with (503 until its runtime is up).
      const stored = await t.app.services.db.sandbox.findUniqueOrThrow({
        where: { sessionId: created.sessionId },
      });
      expect(stored.serviceUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      // Through the provider's edge with the access headers stored for it (Daytona's preview token).
      const headers = storedServiceHeaders(t.app.services.keys.encryption, stored);
      expect(Object.keys(headers)).toEqual(name === 'DAYTONA' ? ['x-daytona-preview-token'] : []);
      const health = await waitFor(async () => {
        try {
          const response = await fetch(`${stored.serviceUrl}/singulacomp/health`, {
            headers,
            signal: AbortSignal.timeout(2_000),
          });
          // Until the daemon listens, Daytona's edge itself answers 502.
          if (response.status === 502) return null;
          return (await response.json()) as { sessionId: string; runtime: { state: string } };
        } catch {
          return null;
        }
      }, 60_000);
      expect(health.sessionId).toBe(created.sessionId);
      // ... and it claimed its bootstrap from the API with its sandbox token.
      const claimed = await waitFor(async () => {
        const row = await t.app.services.db.session.findUniqueOrThrow({ where: { id: created.sessionId } });
        return row.bootstrapClaimedAt;
      }, 60_000);
      expect(claimed).toBeInstanceOf(Date);

      const stopped = await t.request(StopSessionDocument, { input: { sessionId: created.id } });
      expect(stopped.data?.stopSession).toMatchObject({ session: { status: 'STOPPED', stopReason: 'USER' } });
      const after = await waitFor(async () => {
        const s = await session(created.sessionId);
        return s.sandbox?.status === 'DESTROYED' ? s : null;
      });
      expect(after.status).toBe('STOPPED');
      expect(emulated.list()).toEqual([]);
      expect(emulated.nativeState(providerSandboxId)).toBeUndefined();
      expect(after.costUsd).toBeGreaterThan(0);
      expect(after.sandbox?.costUsd).toBe(after.costUsd);
      const intervals = await t.app.services.db.sandboxInterval.findMany({ where: { sandboxId: stored.id } });
      expect(intervals).toHaveLength(1);
      expect(intervals[0]?.stoppedAt).not.toBeNull();
    });

    test('a second session reuses the image snapshot built for the first', async () => {
      const created = await createSession();
      const running = await settled(created.sessionId);
      expect(running.status).toBe('RUNNING');
      const snapshots = await t.app.services.db.snapshot.findMany({ where: { provider: name } });
      expect(emulated.builds()).toBe(1);
      expect(snapshots).toHaveLength(1);
      expect(running.sandbox?.snapshot?.key).toBe(snapshots[0]?.key);
      await t.request(StopSessionDocument, { input: { sessionId: created.id } });
      await waitFor(async () =>
        (await session(created.sessionId)).sandbox?.status === 'DESTROYED' ? true : null,
      );
      expect(emulated.list()).toEqual([]);
    });

    test('each renewLease the sandbox token makes through GraphQL touches the provider (keepAlive)', async () => {
      const created = await createSession();
      const running = await settled(created.sessionId);
      const providerSandboxId = running.sandbox?.providerSandboxId as string;
      const stored = await t.app.services.db.sandbox.findUniqueOrThrow({
        where: { sessionId: created.sessionId },
      });
      const token = decrypt(t.app.services.keys.encryption, stored.sandboxTokenEnc as string);
      let generation: number | undefined;
      for (let renewal = 0; renewal < 2; renewal++) {
        const before = emulated.keepAliveRequests(providerSandboxId).length;
        const res = await t.request(
          RenewLeaseDocument,
          { input: { sessionId: created.sessionId, ...(generation ? { generation } : {}) } },
          token,
        );
        const payload = res.data?.renewLease;
        if (payload?.__typename !== 'RenewLeaseSuccess') throw new Error(JSON.stringify(res));
        generation = payload.lease.generation;
        const calls = await waitFor(async () => {
          const all = emulated.keepAliveRequests(providerSandboxId);
          return all.length > before ? all : null;
        });
        expect(calls.at(-1)?.status).toBeLessThan(300);
      }
      expect(generation).toBe(1);
    });

    test('a 429 with Retry-After on create is retried no sooner than Retry-After and the session runs', async () => {
      const before = emulated.createRequests().length;
      emulated.inject(
        { kind: 'rate-limit', retryAfterSeconds: 1 },
        { path: emulated.createPath, method: 'POST' },
      );
      const created = await createSession();
      const running = await settled(created.sessionId);
      expect(running.failureReason).toBeNull();
      expect(running.status).toBe('RUNNING');
      const creates = emulated.createRequests().slice(before);
      expect(creates.map((r) => r.status)).toEqual([429, creates[1]?.status]);
      expect(creates[1]?.status).toBeLessThan(300);
      expect((creates[1]?.at ?? 0) - (creates[0]?.at ?? 0)).toBeGreaterThanOrEqual(1_000);
      await t.request(StopSessionDocument, { input: { sessionId: created.id } });
      await waitFor(async () =>
        (await session(created.sessionId)).sandbox?.status === 'DESTROYED' ? true : null,
      );
      expect(emulated.list()).toEqual([]);
    });

    test('a provider outage fails the session with a readable reason and leaves no sandbox at the provider', async () => {
      emulated.inject(
        { kind: 'server-error', status: 503 },
        { path: emulated.createPath, method: 'POST', times: 100 },
      );
      try {
        const created = await createSession();
        const failed = await settled(created.sessionId);
        expect(failed.status).toBe('FAILED');
        expect(failed.stopReason).toBe('FAILED');
        expect(failed.failureReason).toMatch(
          new RegExp(
            `^Provisioning on ${name} failed: ${name} unavailable during create after 3 attempt\\(s\\)`,
          ),
        );
        expect(failed.sandbox?.status).toBe('ERROR');
        expect(failed.sandbox?.error).toBe(failed.failureReason);
        expect(emulated.list()).toEqual([]);
        expect(failed.costUsd).toBe(0);
      } finally {
        emulated.clearFaults();
      }
    });

    if (name === 'DAYTONA') {
      test('a failure after the provider created the sandbox destroys it, so nothing leaks', async () => {
        const before = emulated.createRequests().length;
        // Launching the entry goes through the toolbox: every attempt fails after the create succeeded.
        emulated.inject({ kind: 'server-error', status: 502 }, { path: '/toolbox/', times: 100 });
        try {
          const created = await createSession();
          const failed = await settled(created.sessionId);
          expect(failed.status).toBe('FAILED');
          expect(failed.failureReason).toContain('DAYTONA unavailable during launchEntry');
          expect(emulated.createRequests().length - before).toBe(1);
          expect(emulated.list()).toEqual([]);
        } finally {
          emulated.clearFaults();
        }
      });
    }
  });
}
