import { Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  E2B_CAPS,
  E2B_STATE_MAP,
  E2BProvider,
  type E2BProviderOptions,
  fitE2BCpu,
  METADATA_SANDBOX_ID,
  mapE2BState,
} from '../../resolvers/providers/e2b';
import {
  ProviderAccessError,
  ProviderBuildError,
  ProviderLifetimeExceededError,
  ProviderNotRunningError,
  ProviderQuotaError,
  ProviderSnapshotUnusableError,
  ProviderUnavailableError,
} from '../../resolvers/providers/errors';
import { fitSpecToProvider } from '../../resolvers/providers/limits';
import { E2B_PLANS, E2BEmulator } from '../emulators/e2b';
import { answers, fakeDaemonCommand, waitForHealth } from '../emulators/harness';
import { sandboxRequest } from '../emulators/request';
import { adapterSuite, conformance, TEST_RETRY } from './adapter-suite';

const suite = adapterSuite({
  name: 'e2b',
  // A faster create rate than Hobby's one a second, so the file's many creates are not spaced out;
  // the plan's own rate is tested below.
  start: () =>
    E2BEmulator.start({
      failBuildsMatching: /FAIL_THIS_BUILD/,
      foreignTemplates: ['singulacomp-foreign'],
      createsPerSecond: 50,
    }),
  make: (emulator, entryCommand, overrides: Partial<E2BProviderOptions>) =>
    new E2BProvider({
      apiKey: emulator.apiKey,
      apiUrl: emulator.url,
      sandboxUrl: emulator.url,
      domain: emulator.domain,
      hostToUrl: emulator.resolveHost,
      entryCommand,
      pollIntervalMs: 20,
      minCreateIntervalMs: 20,
      retry: TEST_RETRY,
      ...overrides,
    }),
  sandboxIds: (emulator) => emulator.list().map((s) => s.sandboxID),
});
const { request, make: makeProvider } = suite;
let emulator: E2BEmulator;
let provider: E2BProvider;
beforeAll(() => {
  ({ emulator, provider } = suite);
});

let keys = 0;
const freshKey = (label: string) => `${label}-${++keys}-${Date.now().toString(36)}`;
const DOCKERFILE = 'FROM ubuntu:24.04\nRUN echo ready\n';

describe('the E2B adapter against the strict E2B emulator', () => {
  conformance(suite, {
    keepAlive: { path: (id) => `/sandboxes/${id}/timeout`, okStatus: 204 },
    create: { counted: '/v2/sandboxes', faulted: /^\/v2\/sandboxes$/ },
    apiKey: { envVar: 'E2B_API_KEY', wrong: 'e2b_wrong' },
    previewDomain: 'e2b.emulated',
    stoppedState: 'HIBERNATED',
    serviceAccess: null,
    accountMax: {
      cpu: E2B_PLANS.hobby.maxCpu,
      memoryGiB: E2B_PLANS.hobby.maxMemoryMB / 1024,
      diskGiB: E2B_CAPS.diskGiB,
    },
    snapshotResources: (e, ref) => {
      const template = e.templateList().find((t) => t.name === ref);
      return template && { cpu: template.cpuCount, memoryGiB: template.memoryMB / 1024 };
    },
    unknownSnapshotRef: 'singulacomp-never-built',
  });

  it('resumes a sandbox that is being paused: connect waits for the pause, then resumes the same process', async () => {
    const created = await provider.create(request());
    const pid = (await waitForHealth(created.serviceUrl as string)).pid;
    emulator.holdPausing(created.providerSandboxId, 300);
    const resumed = await provider.start(created.providerSandboxId);
    expect(resumed.state).toBe('STARTED');
    expect(
      emulator.requestsTo('POST', `/v2/sandboxes/${created.providerSandboxId}/connect`).map((r) => r.status),
    ).toEqual([201]);
    expect(emulator.get(created.providerSandboxId)?.state).toBe('running');
    expect((await waitForHealth(resumed.serviceUrl as string)).pid).toBe(pid);
  });

  it('answers each route only at its own API version, like E2B’s router', async () => {
    const { providerSandboxId } = await provider.create(request());
    const call = (method: string, path: string) =>
      fetch(`${emulator.url}${path}`, {
        method,
        headers: { 'x-api-key': emulator.apiKey, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: JSON.stringify({ templateID: 'base' }) } : {}),
      }).then((r) => r.status);
    expect(await call('POST', '/sandboxes')).toBe(404);
    expect(await call('POST', '/v3/sandboxes')).toBe(404);
    expect(await call('GET', `/v2/sandboxes/${providerSandboxId}`)).toBe(404);
    expect(await call('POST', `/sandboxes/${providerSandboxId}/connect`)).toBe(404);
    expect(await call('POST', '/templates')).toBe(404);
    expect(await call('GET', `/sandboxes/${providerSandboxId}`)).toBe(200);
  });

  it('retries a rate-limited create that carries no Retry-After (the SDK only retries one that does)', async () => {
    emulator.inject(
      { kind: 'rate-limit', retryAfterSeconds: 1 },
      { path: /^\/v2\/sandboxes$/, method: 'POST', retryAfterHeader: false },
    );
    const before = emulator.requestsTo('POST', /^\/v2\/sandboxes$/).length;
    const created = await provider.create(request());
    expect(created.state).toBe('STARTED');
    expect(
      emulator
        .requestsTo('POST', /^\/v2\/sandboxes$/)
        .slice(before)
        .map((r) => r.status),
    ).toEqual([429, 201]);
  });

  it('creates a running sandbox with our metadata whose background entry serves health, and resumes the same process after a pause', async () => {
    const req = request();
    const created = await provider.create(req);
    const native = emulator.get(created.providerSandboxId);
    expect(native?.state).toBe('running');
    expect(native?.autoPause).toBe(true);
    expect(native?.metadata).toMatchObject({
      team: 'core',
      [METADATA_SANDBOX_ID]: req.sandboxId,
      'singulacomp.sessionId': req.sessionId,
      'singulacomp.projectId': req.projectId,
    });
    expect(native?.envVars).toEqual(req.env);
    expect(created.serviceUrl).toBe(`http://127.0.0.1:${native?.servicePort}`);
    const health = await waitForHealth(created.serviceUrl as string);
    expect(health.sessionId).toBe(req.sessionId);
    expect(Object.values(health.env)).not.toContain(emulator.apiKey);

    await provider.stop(created.providerSandboxId);
    expect(emulator.get(created.providerSandboxId)?.state).toBe('paused');
    // Frozen, not killed: the port accepts nothing until resume.
    expect(await answers(created.serviceUrl as string, 300)).toBe(false);
    const resumed = await provider.start(created.providerSandboxId);
    expect((await waitForHealth(resumed.serviceUrl as string)).pid).toBe(health.pid);
  });

  it('gives up on a sustained 5xx outage with ProviderUnavailableError and kills the half-created sandbox', async () => {
    const startsBefore = emulator.requestsTo('POST', '/process.Process/Start').length;
    emulator.inject(
      { kind: 'server-error', status: 500 },
      { path: '/process.Process/Start', times: Number.POSITIVE_INFINITY },
    );
    const error = await provider.create(request()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).attempts).toBe(3);
    expect(emulator.requestsTo('POST', '/process.Process/Start')).toHaveLength(startsBefore + 3);
    expect(emulator.list()).toEqual([]);
  });

  it('maps both E2B states and a killed sandbox', async () => {
    expect(E2B_STATE_MAP).toEqual({ running: 'STARTED', paused: 'HIBERNATED' });
    const { providerSandboxId } = await provider.create(request());
    expect(await provider.status(providerSandboxId)).toBe('STARTED');
    await provider.stop(providerSandboxId);
    expect(await provider.status(providerSandboxId)).toBe('HIBERNATED');
    await provider.destroy(providerSandboxId);
    expect(await provider.status(providerSandboxId)).toBe('DESTROYED');
    expect(mapE2BState('snapshotting')).toBe('ERROR');
  });

  it('hibernates instead of dying when its own deadline passes without keepAlive', async () => {
    const short = makeProvider({ idleTimeoutMs: 1_000 });
    const { providerSandboxId } = await short.create(request());
    await expect.poll(() => emulator.get(providerSandboxId)?.state, { timeout: 3_000 }).toBe('paused');
    expect(await short.status(providerSandboxId)).toBe('HIBERNATED');
  });

  it('reports keepAlive of a paused sandbox (404 from E2B) as ProviderNotRunningError, not as a gone sandbox', async () => {
    const { providerSandboxId } = await provider.create(request());
    await provider.stop(providerSandboxId);
    const error = await provider.keepAlive(providerSandboxId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderNotRunningError);
    expect(
      emulator.requestsTo('POST', `/sandboxes/${providerSandboxId}/timeout`).map((r) => r.status),
    ).toEqual([404]);
    expect(await provider.status(providerSandboxId)).toBe('HIBERNATED');
  });

  describe('templates', () => {
    it('builds a template through the template build API and reuses it once ready', async () => {
      const key = freshKey('k');
      const ref = await provider.buildSnapshot({
        key,
        dockerfile: DOCKERFILE,
        spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
      });
      expect(ref).toBe(`singulacomp-${key}`);
      const template = emulator.templateList().find((t) => t.name === ref);
      expect(template).toMatchObject({ status: 'ready', cpuCount: 2, memoryMB: 4096 });
      expect(JSON.stringify(template?.steps)).toContain('echo ready');
      const builds = emulator.requestsTo('POST', '/v3/templates').length;
      expect(
        await provider.buildSnapshot({
          key,
          dockerfile: 'FROM x',
          spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
        }),
      ).toBe(ref);
      expect(emulator.requestsTo('POST', '/v3/templates')).toHaveLength(builds);
      const sandbox = await provider.create({ ...request(), snapshotRef: ref });
      expect(emulator.get(sandbox.providerSandboxId)?.templateID).toBe(ref);
    });

    it('does not take a failed build for a ready template: the next build of the name replaces it and boots', async () => {
      const key = freshKey('failed');
      const ref = `singulacomp-${key}`;
      const error = await provider
        .buildSnapshot({ key, dockerfile: 'FROM ubuntu:24.04\nRUN FAIL_THIS_BUILD\n', spec: E2B_CAPS })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderBuildError);
      // The alias answers (the SDK's Template.exists says true), yet nothing can boot from it.
      expect(await Template.exists(ref, { apiKey: emulator.apiKey, apiUrl: emulator.url })).toBe(true);
      // E2B answers 404; the adapter reports the template unusable, so provisioning rebuilds it.
      const refused = await provider.create({ ...request(), snapshotRef: ref }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ProviderSnapshotUnusableError);
      expect((refused as ProviderSnapshotUnusableError).snapshotRef).toBe(ref);
      expect((refused as Error).message).toContain(`template '${ref}' not found`);
      expect(emulator.list().filter((s) => s.templateID === ref)).toEqual([]);

      expect(await provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec: E2B_CAPS })).toBe(ref);
      expect(
        emulator
          .templateList()
          .find((t) => t.name === ref)
          ?.builds.map((b) => b.status),
      ).toEqual(['ready', 'error']);
      const created = await provider.create({ ...request(), snapshotRef: ref });
      expect(emulator.get(created.providerSandboxId)?.templateID).toBe(ref);
    });

    it('waits for a build of the name that is still running instead of reporting it ready or building twice', async () => {
      const key = freshKey('concurrent');
      const spec = { cpu: 2, memoryGiB: 2, diskGiB: 10 };
      const [first, second] = await Promise.all([
        provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec }),
        expect
          .poll(() => emulator.templateList().some((t) => t.name === `singulacomp-${key}`), {
            timeout: 5_000,
          })
          .toBe(true)
          .then(() => provider.buildSnapshot({ key, dockerfile: DOCKERFILE, spec })),
      ]);
      expect(second).toBe(first);
      expect(emulator.templateList().find((t) => t.name === first)?.builds).toHaveLength(1);
    });

    it('reports a template name owned by another team (403) as ProviderAccessError instead of "exists"', async () => {
      const error = await provider
        .buildSnapshot({ key: 'foreign', dockerfile: DOCKERFILE, spec: E2B_CAPS })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderAccessError);
      expect((error as Error).message).not.toContain('Set a valid key');
    });
  });

  describe('resource limits', () => {
    it('caps disk at the plan’s: 10 GiB on Hobby (the default), 20 GiB on Pro', async () => {
      expect(provider.caps).toEqual({ cpu: 8, memoryGiB: 8, diskGiB: 10 });
      expect(fitSpecToProvider(provider, { cpu: 2, memoryGiB: 4, diskGiB: 20 }).spec.diskGiB).toBe(10);
      const pro = makeProvider({ plan: 'pro' });
      expect(pro.caps).toEqual({ cpu: 8, memoryGiB: 8, diskGiB: 20 });
      expect(pro.maxSandboxLifetimeMs).toBe(86_400_000);
      const { providerSandboxId } = await provider.create(request());
      const info = (await fetch(`${emulator.url}/sandboxes/${providerSandboxId}`, {
        headers: { 'x-api-key': emulator.apiKey },
      }).then((r) => r.json())) as { diskSizeMB: number };
      expect(info.diskSizeMB).toBe(provider.caps.diskGiB * 1024);
    });

    it('runs 1 or an even number of vCPUs: odd counts round up within the cap, with a warning', () => {
      expect([1, 2, 3, 5, 7, 8].map((cpu) => fitE2BCpu(cpu, 8))).toEqual([1, 2, 4, 6, 8, 8]);
      expect(fitE2BCpu(7, 7)).toBe(6);
      expect(fitSpecToProvider(provider, { cpu: 3, memoryGiB: 4, diskGiB: 10 })).toEqual({
        spec: { cpu: 4, memoryGiB: 4, diskGiB: 10 },
        warnings: ['cpu: E2B runs 1 or an even number of vCPUs; 3 vCPU rounded to 4'],
      });
      expect(fitSpecToProvider(provider, { cpu: 9, memoryGiB: 16, diskGiB: 10 }).spec).toEqual({
        cpu: 8,
        memoryGiB: 8,
        diskGiB: 10,
      });
    });

    it('builds a template for a 3-vCPU spec as 4 vCPUs, which E2B refuses as given', async () => {
      const raw = await Template.build(
        Template().fromDockerfile(DOCKERFILE),
        `singulacomp-${freshKey('raw')}`,
        {
          apiKey: emulator.apiKey,
          apiUrl: emulator.url,
          cpuCount: 3,
          memoryMB: 4096,
        },
      ).catch((e: unknown) => e);
      expect((raw as Error).message).toContain('CPU count must be 1 or an even number');
      const ref = await provider.buildSnapshot({
        key: freshKey('odd'),
        dockerfile: DOCKERFILE,
        spec: { cpu: 3, memoryGiB: 4, diskGiB: 20 },
      });
      expect(emulator.templateList().find((t) => t.name === ref)).toMatchObject({
        status: 'ready',
        cpuCount: 4,
      });
    });
  });
});

describe('the E2B adapter at the plan’s maximum sandbox length', () => {
  const MAX_MS = 2_000;
  let short: E2BEmulator;
  let adapter: E2BProvider;
  let dir: string;

  beforeAll(async () => {
    // The sandbox's deadline timer fires a minute late, so it is still running past its maximum.
    short = await E2BEmulator.start({ maxInstanceLengthMs: MAX_MS, evictionLagMs: 60_000 });
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    dir = mkdtempSync(join(tmpdir(), 'e2b-length-'));
    adapter = new E2BProvider({
      apiKey: short.apiKey,
      apiUrl: short.url,
      sandboxUrl: short.url,
      domain: short.domain,
      hostToUrl: short.resolveHost,
      entryCommand: fakeDaemonCommand(dir),
      maxSandboxLifetimeMs: MAX_MS,
      retry: TEST_RETRY,
    });
  });

  afterAll(async () => {
    await short.close();
    const { rmSync } = await import('node:fs');
    rmSync(dir, { recursive: true, force: true });
  });

  it('asks for an idle timeout within the maximum, reports when the sandbox expires, and ends keep-alives past it with ProviderLifetimeExceededError', async () => {
    const created = await adapter.create(sandboxRequest());
    const native = short.get(created.providerSandboxId);
    // A 30-minute idle timeout would be refused (400 "Timeout cannot be greater than …").
    expect(short.requestsTo('POST', '/v2/sandboxes').map((r) => r.status)).toEqual([201]);
    const startedAt = Date.parse(native?.startedAt as string);
    expect(created.expiresAt?.getTime()).toBeGreaterThanOrEqual(startedAt + MAX_MS - 1_000);
    expect(created.expiresAt?.getTime()).toBeLessThanOrEqual(startedAt + MAX_MS + 1_000);
    expect(adapter.maxSandboxLifetimeMs).toBe(MAX_MS);

    await adapter.keepAlive(created.providerSandboxId);
    expect(Date.parse(short.get(created.providerSandboxId)?.endAt as string)).toBeLessThanOrEqual(
      startedAt + MAX_MS,
    );

    await expect.poll(() => Date.now() > startedAt + MAX_MS + 50, { timeout: 5_000 }).toBe(true);
    const error = await adapter.keepAlive(created.providerSandboxId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderLifetimeExceededError);
    expect(
      short.requestsTo('POST', `/sandboxes/${created.providerSandboxId}/timeout`).map((r) => r.status),
    ).toEqual([204, 400]);

    // connect past the maximum length is a 400 too: start pauses it and resumes a new instance.
    const restarted = await adapter.start(created.providerSandboxId);
    expect(restarted.state).toBe('STARTED');
    expect(
      short.requestsTo('POST', `/v2/sandboxes/${created.providerSandboxId}/connect`).map((r) => r.status),
    ).toEqual([400, 201]);
    expect(Date.parse(short.get(created.providerSandboxId)?.startedAt as string)).toBeGreaterThan(
      startedAt + MAX_MS,
    );
    await adapter.destroy(created.providerSandboxId);
  });
});

describe('the E2B adapter within the Hobby plan’s rate limits', () => {
  let hobby: E2BEmulator;
  let adapter: E2BProvider;
  let dir: string;

  beforeAll(async () => {
    // Hobby: one create a second, refused without Retry-After; three running sandboxes at most
    // stand in for the plan's 20.
    hobby = await E2BEmulator.start({ plan: 'hobby', maxConcurrent: 3 });
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    dir = mkdtempSync(join(tmpdir(), 'e2b-hobby-'));
    adapter = new E2BProvider({
      apiKey: hobby.apiKey,
      apiUrl: hobby.url,
      sandboxUrl: hobby.url,
      domain: hobby.domain,
      hostToUrl: hobby.resolveHost,
      entryCommand: fakeDaemonCommand(dir),
      retry: TEST_RETRY,
    });
  });

  afterAll(async () => {
    await hobby.close();
    const { rmSync } = await import('node:fs');
    rmSync(dir, { recursive: true, force: true });
  });

  it('spaces parallel creates to the plan’s one a second so they all succeed, and reports the concurrent-sandbox limit as ProviderQuotaError without retrying', async () => {
    const created = await Promise.all([1, 2, 3].map(() => adapter.create(sandboxRequest())));
    expect(created.map((c) => c.state)).toEqual(['STARTED', 'STARTED', 'STARTED']);
    const accepted = () => hobby.requestsTo('POST', /^\/v2\/sandboxes$/).filter((r) => r.status === 201);
    expect(accepted()).toHaveLength(3);
    expect(hobby.list()).toHaveLength(3);

    const postsBefore = hobby.requestsTo('POST', /^\/v2\/sandboxes$/).length;
    const over = await adapter.create(sandboxRequest()).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(ProviderQuotaError);
    expect((over as Error).message).toContain('maximum number of concurrent E2B sandboxes');
    // Refused once, not retried: waiting does not free a sandbox.
    expect(
      hobby
        .requestsTo('POST', /^\/v2\/sandboxes$/)
        .slice(postsBefore)
        .map((r) => r.status),
    ).toEqual([429]);
    expect(accepted()).toHaveLength(3);
    expect(hobby.list()).toHaveLength(3);
    for (const sandbox of created) await adapter.destroy(sandbox.providerSandboxId);
  });
});
