import { beforeAll, describe, expect, it } from 'vitest';
import {
  DAYTONA_DEFAULT_CAPS,
  DAYTONA_SNAPSHOT_STATE_MAP,
  DAYTONA_STATE_MAP,
  DaytonaProvider,
  LABEL_SANDBOX_ID,
  serviceAnswers,
  mapDaytonaSnapshotState,
  mapDaytonaState,
} from '../../resolvers/providers/daytona';
import {
  ProviderBuildError,
  ProviderEntryFailedError,
  ProviderQuotaError,
  ProviderSnapshotUnusableError,
  ProviderUnavailableError,
  ProviderValidationError,
} from '../../resolvers/providers/errors';
import { fitSpecToProvider } from '../../resolvers/providers/limits';
import {
  DAYTONA_TIER_1,
  DaytonaEmulator,
  SNAPSHOT_INACTIVE_AFTER_MS,
  SNAPSHOT_REACTIVATION_COOLDOWN_MS,
} from '../emulators/daytona';
import { answers, waitForHealth } from '../emulators/harness';
import { adapterSuite, conformance, TEST_RETRY } from './adapter-suite';

const suite = adapterSuite({
  name: 'daytona',
  start: () =>
    DaytonaEmulator.start({ failBuildsMatching: /FAIL_THIS_BUILD/, hangBuildsMatching: /HANG_THIS_BUILD/ }),
  make: (emulator, entryCommand, overrides: Partial<ConstructorParameters<typeof DaytonaProvider>[0]>) =>
    new DaytonaProvider({
      apiKey: emulator.apiKey,
      apiUrl: emulator.apiUrl,
      entryCommand,
      pollIntervalMs: 20,
      activationRetryIntervalMs: 20,
      retry: TEST_RETRY,
      ...overrides,
    }),
  sandboxIds: (emulator) => emulator.list().map((s) => s.id),
  env: (sessionId) => ({ SINGULACOMP_BRANCH_NAME: sessionId }),
});
const { request, make: makeProvider } = suite;
let emulator: DaytonaEmulator;
let provider: DaytonaProvider;
beforeAll(() => {
  ({ emulator, provider } = suite);
});

let keys = 0;
/** A content key no other test in this file uses (the emulator keeps snapshots across tests). */
const freshKey = (label: string) => `${label}-${++keys}-${Date.now().toString(36)}`;
const DOCKERFILE = 'FROM ubuntu:24.04\nRUN echo ready\n';

describe('the Daytona adapter against the strict Daytona emulator', () => {
  conformance(suite, {
    keepAlive: { path: (id) => `/api/sandbox/${id}/last-activity`, okStatus: 201 },
    create: { counted: /^\/api\/sandbox$/, faulted: /^\/api\/sandbox$/ },
    apiKey: { envVar: 'DAYTONA_API_KEY', wrong: 'wrong' },
    previewDomain: 'proxy.daytona.emulated',
    stoppedState: 'STOPPED',
    serviceAccess: { refusedStatus: 307 },
    accountMax: {
      cpu: DAYTONA_TIER_1.maxCpuPerSandbox,
      memoryGiB: DAYTONA_TIER_1.maxMemoryPerSandboxGiB,
      diskGiB: DAYTONA_TIER_1.maxDiskPerSandboxGiB,
    },
    snapshotResources: (e, ref) => {
      const snapshot = e.snapshots().find((s) => s.name === ref);
      return snapshot && { cpu: snapshot.cpu, memoryGiB: snapshot.memory };
    },
    unknownSnapshotRef: 'singulacomp-never-built',
    transition: {
      operation: 'destroy',
      path: (id) => new RegExp(`^/api/sandbox/${id}$`),
      method: 'DELETE',
      hold: (e, id) => e.holdTransition(id, 'stopping', 'stopped'),
    },
  });

  it('creates a labelled, named sandbox whose entry runs in a toolbox session, reached through the preview proxy', async () => {
    const req = request();
    const created = await provider.create(req);
    const native = emulator.get(created.providerSandboxId);
    expect(native?.state).toBe('started');
    expect(native?.labels).toMatchObject({
      team: 'core',
      [LABEL_SANDBOX_ID]: req.sandboxId,
      'singulacomp.session-id': req.sessionId,
      'singulacomp.project-id': req.projectId,
    });
    expect(native?.name).toBe(`singulacomp-${req.sandboxId}`);
    expect(native?.env).toEqual(req.env);
    expect(created.serviceUrl).toBe(`http://127.0.0.1:${native?.previewPort}`);
    expect(created.serviceHeaders).toEqual({ 'x-daytona-preview-token': native?.previewToken });

    const health = await waitForHealth(created.serviceUrl as string, 10_000, created.serviceHeaders);
    expect(health.sessionId).toBe(req.sessionId);
    expect(health.env.SINGULACOMP_TOKEN).toBe('sandbox-jwt');
    expect(Object.values(health.env)).not.toContain(emulator.apiKey);
    expect(
      emulator.requestsTo(
        'POST',
        `/toolbox/${created.providerSandboxId}/process/session/singulacomp-entry/exec`,
      ),
    ).toHaveLength(1);

    await provider.stop(created.providerSandboxId);
    expect(emulator.get(created.providerSandboxId)?.state).toBe('stopped');
    expect(await answers(created.serviceUrl as string, 500, created.serviceHeaders)).toBe(false);
  });

  it('renews the preview token on every start: the old one is refused by the proxy, the new one works', async () => {
    const created = await provider.create(request());
    const first = created.serviceHeaders?.['x-daytona-preview-token'];
    await provider.stop(created.providerSandboxId);
    const restarted = await provider.start(created.providerSandboxId);
    const second = restarted.serviceHeaders?.['x-daytona-preview-token'];
    expect(second).toBe(emulator.get(created.providerSandboxId)?.previewToken);
    expect(second).not.toBe(first);
    expect((await waitForHealth(restarted.serviceUrl as string, 10_000, restarted.serviceHeaders)).ok).toBe(
      true,
    );
    const stale = await fetch(`${restarted.serviceUrl}/singulacomp/health`, {
      headers: { 'x-daytona-preview-token': first as string },
      redirect: 'manual',
    });
    expect(stale.status).toBe(307);
    expect(stale.headers.get('location')).toMatch(new RegExp(`^${emulator.loginUrl}\\?`));
  });

  it('does not take the sign-in page a stale preview token is redirected to for the service answering', async () => {
    const created = await provider.create(request());
    const url = created.serviceUrl as string;
    expect(await serviceAnswers(url, created.serviceHeaders ?? {})).toBe(true);
    // Followed, the redirect ends on a 200 sign-in page.
    const followed = await fetch(`${url}/singulacomp/health`, {
      headers: { 'x-daytona-preview-token': 'stale' },
    });
    expect(followed.status).toBe(200);
    expect(followed.url.startsWith(emulator.loginUrl)).toBe(true);
    expect(await serviceAnswers(url, { 'x-daytona-preview-token': 'stale' })).toBe(false);
  });

  it('reports a name taken by another sandbox (409) as final, without retrying it', async () => {
    const created = await provider.create(request());
    const name = emulator.get(created.providerSandboxId)?.name as string;
    const before = emulator.requestsTo('POST', /^\/api\/sandbox$/).length;
    const { Daytona } = await import('@daytonaio/sdk');
    const client = new Daytona({
      apiKey: emulator.apiKey,
      apiUrl: emulator.apiUrl,
      useDeprecatedPolling: true,
    });
    try {
      const { toProviderError } = await import('../../resolvers/providers/errors');
      const clash = await client.create({ name }).catch((e: unknown) => e);
      expect(toProviderError(clash, { provider: 'DAYTONA', operation: 'create' })).toBeInstanceOf(
        ProviderValidationError,
      );
      expect(
        emulator
          .requestsTo('POST', /^\/api\/sandbox$/)
          .slice(before)
          .map((r) => r.status),
      ).toEqual([409]);
      expect(emulator.get(created.providerSandboxId)?.state).toBe('started');
    } finally {
      await client[Symbol.asyncDispose]();
    }
  });

  it('reuses the entry session a retried launch finds taken (toolbox 409) instead of discarding the sandbox', async () => {
    // The first exec fails after the session was created; the retry's createSession answers 409.
    emulator.inject(
      { kind: 'server-error', status: 502 },
      { path: /\/process\/session\/singulacomp-entry\/exec$/ },
    );
    const before = emulator.requestsTo('POST', /\/process\/session$/).length;
    const created = await provider.create(request());
    expect(created.state).toBe('STARTED');
    expect(
      emulator
        .requestsTo('POST', /\/process\/session$/)
        .slice(before)
        .map((r) => r.status),
    ).toEqual([201, 409]);
    expect(emulator.get(created.providerSandboxId)?.state).toBe('started');
    expect(emulator.get(created.providerSandboxId)?.processes.filter((p) => p.running)).toHaveLength(1);
    expect((await waitForHealth(created.serviceUrl as string, 10_000, created.serviceHeaders)).ok).toBe(true);
  });

  it('fails create with ProviderEntryFailedError when the entry exits at launch (missing binary), leaving nothing', async () => {
    const missing = makeProvider({ entryCommand: '/nonexistent/singulacomp-entrypoint' });
    try {
      const error = await missing.create(request()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderEntryFailedError);
      expect((error as Error).message).toContain('exited with 127');
      expect(emulator.list()).toEqual([]);
    } finally {
      await missing.close();
    }
  });

  it('boots without a snapshot on the account default (1 vCPU / 1 GiB / 3 GiB), or from defaultImage with the fitted spec', async () => {
    const plain = await provider.create(request());
    expect(emulator.get(plain.providerSandboxId)).toMatchObject({ cpu: 1, memory: 1, disk: 3 });
    const imaged = makeProvider({ defaultImage: 'ubuntu:24.04' });
    try {
      const created = await imaged.create({ ...request(), spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 } });
      expect(emulator.get(created.providerSandboxId)).toMatchObject({
        cpu: 2,
        memory: 4,
        disk: 10,
        snapshot: null,
      });
    } finally {
      await imaged.close();
    }
  });

  it('retries a request that times out and succeeds', async () => {
    const timeoutProvider = makeProvider({ requestTimeoutMs: 300 });
    try {
      const { providerSandboxId } = await timeoutProvider.create(request());
      const path = `/api/sandbox/${providerSandboxId}/last-activity`;
      emulator.inject({ kind: 'slow', delayMs: 1_000 }, { path });
      await timeoutProvider.keepAlive(providerSandboxId);
      expect(emulator.requestsTo('POST', path).length).toBeGreaterThanOrEqual(2);
    } finally {
      await timeoutProvider.close();
    }
  });

  it('gives up on a sustained 5xx outage with ProviderUnavailableError and deletes the half-created sandbox', async () => {
    const sessionsBefore = emulator.requestsTo('POST', /\/process\/session$/).length;
    const deletesBefore = emulator.requestsTo('DELETE', /^\/api\/sandbox\//).length;
    emulator.inject(
      { kind: 'server-error', status: 503 },
      { path: '/process/session', times: Number.POSITIVE_INFINITY },
    );
    const error = await provider.create(request()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).attempts).toBe(3);
    expect(emulator.requestsTo('POST', /\/process\/session$/)).toHaveLength(sessionsBefore + 3);
    expect(emulator.list()).toEqual([]);
    expect(emulator.requestsTo('DELETE', /^\/api\/sandbox\//)).toHaveLength(deletesBefore + 1);
  });

  it('maps every Daytona sandbox and snapshot state', async () => {
    const { providerSandboxId } = await provider.create(request());
    for (const [native, ours] of Object.entries(DAYTONA_STATE_MAP)) {
      emulator.setState(providerSandboxId, native);
      expect(await provider.status(providerSandboxId), native).toBe(ours);
    }
    emulator.setState(providerSandboxId, 'started');
    expect(mapDaytonaState('something-new')).toBe('ERROR');
    expect(mapDaytonaState(undefined)).toBe('ERROR');
    expect(Object.keys(DAYTONA_SNAPSHOT_STATE_MAP).sort()).toEqual(
      [
        'active',
        'build_failed',
        'building',
        'error',
        'inactive',
        'pending',
        'pulling',
        'removing',
        'snapshotting',
      ].sort(),
    );
    expect(mapDaytonaSnapshotState('inactive')).toBe('INACTIVE');
    expect(mapDaytonaSnapshotState('build_failed')).toBe('FAILED');
    expect(mapDaytonaSnapshotState('something-new')).toBe('FAILED');
  });

  describe('snapshots', () => {
    it('builds a snapshot from a Dockerfile string with the spec fitted to the caps, and reuses it by name', async () => {
      const key = freshKey('build');
      const ref = await provider.buildSnapshot({
        key,
        dockerfile: DOCKERFILE,
        spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
      });
      expect(ref).toBe(`singulacomp-${key}`);
      const snapshot = emulator.snapshots().find((s) => s.name === ref);
      expect(snapshot).toMatchObject({ state: 'active', cpu: 2, memory: 4, disk: 10 });
      expect(snapshot?.dockerfile).toContain('RUN echo ready');
      const created = emulator.requestsTo('POST', /^\/api\/snapshots$/).length;
      expect(await provider.buildSnapshot({ key, dockerfile: 'x', spec: DAYTONA_DEFAULT_CAPS })).toBe(ref);
      expect(emulator.requestsTo('POST', /^\/api\/snapshots$/)).toHaveLength(created);

      const sandbox = await provider.create({ ...request(), snapshotRef: ref });
      expect(emulator.get(sandbox.providerSandboxId)).toMatchObject({
        snapshot: ref,
        cpu: 2,
        memory: 4,
        disk: 10,
      });
    });

    it('activates a snapshot left unused for 14 days and waits while it is pending before creating from it', async () => {
      const ref = await provider.buildSnapshot({
        key: freshKey('idle'),
        dockerfile: DOCKERFILE,
        spec: DAYTONA_DEFAULT_CAPS,
      });
      emulator.advanceClock(SNAPSHOT_INACTIVE_AFTER_MS + SNAPSHOT_REACTIVATION_COOLDOWN_MS + 60_000);
      const snapshot = emulator.snapshots().find((s) => s.name === ref);
      expect(snapshot?.state).toBe('inactive');
      const creates = emulator.requestsTo('POST', /^\/api\/sandbox$/).length;
      const created = await provider.create({ ...request(), snapshotRef: ref });
      expect(created.state).toBe('STARTED');
      expect(
        emulator.requestsTo('POST', `/api/snapshots/${snapshot?.id}/activate`).map((r) => r.status),
      ).toEqual([200]);
      // Activation answers with the snapshot pending: a create then would be 400 "Snapshot … is pending".
      expect(
        emulator
          .requestsTo('POST', /^\/api\/sandbox$/)
          .slice(creates)
          .map((r) => r.status),
      ).toEqual([200]);
      expect(emulator.snapshots().find((s) => s.name === ref)?.state).toBe('active');
    });

    it('waits out the ten minutes Daytona refuses to activate a snapshot after deactivating it', async () => {
      const ref = await provider.buildSnapshot({
        key: freshKey('cooldown'),
        dockerfile: DOCKERFILE,
        spec: DAYTONA_DEFAULT_CAPS,
      });
      // Deactivated a minute ago: activation is refused for nine more minutes.
      emulator.advanceClock(SNAPSHOT_INACTIVE_AFTER_MS + 60_000);
      const snapshot = emulator.snapshots().find((s) => s.name === ref);
      const activations = () => emulator.requestsTo('POST', `/api/snapshots/${snapshot?.id}/activate`);
      const creating = provider.create({ ...request(), snapshotRef: ref });
      await expect.poll(() => activations().length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
      emulator.advanceClock(SNAPSHOT_REACTIVATION_COOLDOWN_MS);
      const created = await creating;
      expect(created.state).toBe('STARTED');
      const statuses = activations().map((r) => r.status);
      expect(statuses.at(-1)).toBe(200);
      expect(statuses.slice(0, -1).every((status) => status === 400)).toBe(true);
      expect(emulator.get(created.providerSandboxId)?.snapshot).toBe(ref);
    });

    it('reactivates an inactive snapshot on a rebuild instead of re-creating its name (409)', async () => {
      const key = freshKey('reactivate');
      const ref = await provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec: DAYTONA_DEFAULT_CAPS });
      emulator.advanceClock(SNAPSHOT_INACTIVE_AFTER_MS + SNAPSHOT_REACTIVATION_COOLDOWN_MS + 60_000);
      const creates = emulator.requestsTo('POST', /^\/api\/snapshots$/).length;
      expect(await provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec: DAYTONA_DEFAULT_CAPS })).toBe(
        ref,
      );
      expect(emulator.requestsTo('POST', /^\/api\/snapshots$/)).toHaveLength(creates);
      expect(emulator.requestsTo('POST', /^\/api\/snapshots\/[^/]+\/activate$/).at(-1)?.status).toBe(200);
      expect(emulator.snapshots().find((s) => s.name === ref)?.state).toBe('active');
    });

    it('replaces a failed snapshot under the next generation’s name, since Daytona keeps the failed name forever', async () => {
      const key = freshKey('failed');
      const ref = await provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec: DAYTONA_DEFAULT_CAPS });
      emulator.setSnapshotState(ref, 'error');
      const created = await provider.create({ ...request(), snapshotRef: ref }).catch((e: unknown) => e);
      expect(created).toBeInstanceOf(ProviderSnapshotUnusableError);
      expect((created as ProviderSnapshotUnusableError).state).toBe('error');
      expect(emulator.list()).toEqual([]);

      const rebuilt = await provider.buildSnapshot({
        key,
        dockerfile: DOCKERFILE,
        spec: DAYTONA_DEFAULT_CAPS,
      });
      expect(rebuilt).toBe(`${ref}-r2`);
      expect(
        emulator
          .snapshots()
          .filter((s) => s.name.startsWith(ref))
          .map((s) => [s.name, s.state]),
      ).toEqual([
        [ref, 'error'],
        [`${ref}-r2`, 'active'],
      ]);
      expect(emulator.requestsTo('POST', /^\/api\/snapshots$/).filter((r) => r.status === 409)).toEqual([]);
    });

    it('keeps polling a build through a failed poll instead of posting the name again (409) and recording a failure', async () => {
      const key = freshKey('flaky-poll');
      const name = `singulacomp-${key}`;
      // The first GET is the adapter's look-up (404: no such snapshot yet); the next, a poll of
      // the running build, fails once.
      emulator.inject(
        { kind: 'server-error', status: 502 },
        { method: 'GET', path: `/api/snapshots/${name}`, skip: 1 },
      );
      const ref = await provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec: DAYTONA_DEFAULT_CAPS });
      expect(ref).toBe(name);
      expect(
        emulator
          .requestsTo('GET', `/api/snapshots/${name}`)
          .map((r) => r.status)
          .slice(0, 2),
      ).toEqual([404, 502]);
      expect(emulator.requestsTo('POST', /^\/api\/snapshots$/).filter((r) => r.status === 409)).toEqual([]);
      expect(emulator.snapshots().find((s) => s.name === name)?.state).toBe('active');
    });

    it('gives up on a snapshot build that never ends, at the build deadline', {
      timeout: 10_000,
    }, async () => {
      const impatient = makeProvider({ snapshotBuildTimeoutMs: 300 });
      try {
        const error = await impatient
          .buildSnapshot({
            key: freshKey('hang'),
            dockerfile: 'FROM ubuntu:24.04\nRUN HANG_THIS_BUILD\n',
            spec: DAYTONA_DEFAULT_CAPS,
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ProviderBuildError);
        expect((error as Error).message).toMatch(/still (pending|building) after/);
      } finally {
        await impatient.close();
      }
    });

    it('reports a Dockerfile that fails to build as ProviderBuildError', async () => {
      const key = freshKey('broken');
      const error = await provider
        .buildSnapshot({
          key,
          dockerfile: 'FROM ubuntu:24.04\nRUN FAIL_THIS_BUILD\n',
          spec: DAYTONA_DEFAULT_CAPS,
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderBuildError);
      expect(emulator.snapshots().find((s) => s.name === `singulacomp-${key}`)?.state).toBe('build_failed');
    });
  });

  describe('resource limits', () => {
    it('caps a sandbox at Daytona’s documented default of 4 vCPU / 8 GiB / 10 GiB unless configured', async () => {
      expect(provider.caps).toEqual({ cpu: 4, memoryGiB: 8, diskGiB: 10 });
      const raised = makeProvider({ caps: { cpu: 8, diskGiB: 50 } });
      try {
        expect(raised.caps).toEqual({ cpu: 8, memoryGiB: 8, diskGiB: 50 });
      } finally {
        await raised.close();
      }
      // The platform default of 20 GiB disk would be refused by a default account: clamped, with a warning.
      expect(fitSpecToProvider(provider, { cpu: 2, memoryGiB: 4, diskGiB: 20 })).toEqual({
        spec: { cpu: 2, memoryGiB: 4, diskGiB: 10 },
        warnings: ['diskGiB: 20 GiB exceeds the DAYTONA cap of 10; clamped to 10'],
      });
    });

    it('reports a spec above the account’s per-sandbox maximum as ProviderQuotaError, not as a bad key', async () => {
      const overconfigured = makeProvider({ caps: { cpu: 16 } });
      try {
        const error = await overconfigured
          .buildSnapshot({
            key: freshKey('big'),
            dockerfile: DOCKERFILE,
            spec: { cpu: 8, memoryGiB: 4, diskGiB: 10 },
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ProviderQuotaError);
        expect((error as Error).message).toContain('CPU request 8 exceeds maximum allowed per sandbox (4)');
      } finally {
        await overconfigured.close();
      }
    });

    it('reports the account’s total CPU limit as ProviderQuotaError and leaves the sandboxes that fit', async () => {
      const ref = await provider.buildSnapshot({
        key: freshKey('totals'),
        dockerfile: DOCKERFILE,
        spec: { cpu: 4, memoryGiB: 4, diskGiB: 10 },
      });
      await provider.create({ ...request(), snapshotRef: ref });
      await provider.create({ ...request(), snapshotRef: ref });
      const error = await provider.create({ ...request(), snapshotRef: ref }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderQuotaError);
      expect((error as Error).message).toContain('Total CPU limit exceeded. Maximum allowed: 10');
      expect(emulator.list()).toHaveLength(2);
    });
  });
});
