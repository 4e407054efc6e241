import { beforeAll, describe, expect, it } from 'vitest';
import { ProviderUnavailableError } from '../../resolvers/providers/errors';
import {
  LABEL_SANDBOX_ID,
  mapPlatinumState,
  PLATINUM_STATE_MAP,
  PlatinumProvider,
  type PlatinumProviderOptions,
} from '../../resolvers/providers/platinum';
import { answers, waitForHealth } from '../emulators/harness';
import { PlatinumEmulator } from '../emulators/platinum';
import { adapterSuite, conformance, TEST_RETRY } from './adapter-suite';

const suite = adapterSuite({
  name: 'platinum',
  start: () => PlatinumEmulator.start(),
  make: (emulator, entryCommand, overrides: Partial<PlatinumProviderOptions>) =>
    new PlatinumProvider({
      apiKey: emulator.apiKey,
      apiUrl: emulator.url,
      entryCommand,
      pollIntervalMs: 10,
      retry: TEST_RETRY,
      ...overrides,
    }),
  sandboxIds: (emulator) => emulator.list().map((s) => s.id),
});
const { request, make: makeProvider } = suite;
let emulator: PlatinumEmulator;
let provider: PlatinumProvider;
beforeAll(() => {
  ({ emulator, provider } = suite);
});

describe('the Platinum adapter against the Platinum emulator', () => {
  conformance(suite, {
    keepAlive: { path: (id) => `/v1/sandboxes/${id}/keepalive`, okStatus: 204 },
    create: { counted: /^\/v1\/sandboxes$/, faulted: /^\/v1\/sandboxes$/ },
    apiKey: { envVar: 'PLATINUM_API_KEY', wrong: 'wrong' },
    previewDomain: 'run.platinum.emulated',
    stoppedState: 'STOPPED',
    serviceAccess: null,
    accountMax: { cpu: 32, memoryGiB: 64, diskGiB: 200 },
    snapshotResources: (e, ref) => {
      const image = e.imageList().find((i) => i.name === ref);
      return image && { cpu: image.cpu, memoryGiB: image.memoryGiB };
    },
    unknownSnapshotRef: 'singulacomp-never-built',
  });

  it('creates a running sandbox whose entrypoint serves health, stops, restarts and deletes it', async () => {
    const req = request();
    const created = await provider.create(req);
    expect(created.state).toBe('STARTED');
    const native = emulator.get(created.providerSandboxId);
    expect(native).toMatchObject({
      state: 'running',
      cpu: 2,
      memoryGiB: 4,
      diskGiB: 20,
      idempotencyKey: req.sandboxId,
    });
    expect(native?.labels).toMatchObject({ team: 'core', [LABEL_SANDBOX_ID]: req.sandboxId });
    expect(native?.env).toEqual(req.env);
    expect(native?.entrypoint).toEqual(['/bin/sh', '-c', suite.entryCommand]);
    expect(created.serviceUrl).toBe(`http://127.0.0.1:${native?.servicePort}`);

    const health = await waitForHealth(created.serviceUrl as string);
    expect(health.sessionId).toBe(req.sessionId);
    expect(Object.values(health.env)).not.toContain(emulator.apiKey);

    const stopped = await provider.stop(created.providerSandboxId);
    expect(stopped.state).toBe('STOPPED');
    expect(emulator.get(created.providerSandboxId)?.state).toBe('stopped');
    expect(await answers(created.serviceUrl as string)).toBe(false);

    const restarted = await provider.start(created.providerSandboxId);
    expect(restarted.state).toBe('STARTED');
    const after = await waitForHealth(restarted.serviceUrl as string);
    expect(after.sessionId).toBe(req.sessionId);
    expect(after.pid).not.toBe(health.pid);

    await provider.destroy(created.providerSandboxId);
    expect(emulator.list()).toEqual([]);
    expect(await provider.status(created.providerSandboxId)).toBe('DESTROYED');
  });

  it('retries a request that times out and succeeds', async () => {
    const impatient = makeProvider({ requestTimeoutMs: 200 });
    // Created with the default deadline: only the keepalive under test is meant to time out.
    const { providerSandboxId } = await provider.create(request());
    const path = `/v1/sandboxes/${providerSandboxId}/keepalive`;
    emulator.inject({ kind: 'slow', delayMs: 600 }, { path });
    await impatient.keepAlive(providerSandboxId);
    expect(emulator.requestsTo('POST', path).map((c) => c.status)).toContain(204);
  });

  it('gives up on a sustained 5xx outage with ProviderUnavailableError and deletes the half-created sandbox', async () => {
    const deletesBefore = emulator.requestsTo('DELETE', /^\/v1\/sandboxes\//).length;
    emulator.inject(
      { kind: 'server-error', status: 503 },
      { path: /^\/v1\/sandboxes\/plt_[^/]+$/, method: 'GET', times: 3 },
    );
    const error = await provider.create(request()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).attempts).toBe(3);
    expect(emulator.requestsTo('DELETE', /^\/v1\/sandboxes\//)).toHaveLength(deletesBefore + 1);
    expect(emulator.list()).toEqual([]);
  });

  it('creates exactly one sandbox when create is retried after a 5xx (Idempotency-Key)', async () => {
    emulator.inject(
      { kind: 'server-error', status: 502 },
      { path: /^\/v1\/sandboxes$/, method: 'POST', times: 2 },
    );
    const created = await provider.create(request());
    expect(emulator.list().map((s) => s.id)).toEqual([created.providerSandboxId]);
  });

  it('maps every Platinum state through status()', async () => {
    const { providerSandboxId } = await provider.create(request());
    for (const [native, ours] of Object.entries(PLATINUM_STATE_MAP)) {
      if (native === 'deleted') continue; // a deleted sandbox answers 404, checked below
      emulator.setState(providerSandboxId, native);
      expect(await provider.status(providerSandboxId), native).toBe(ours);
    }
    emulator.setState(providerSandboxId, 'deleted');
    expect(await provider.status(providerSandboxId)).toBe(PLATINUM_STATE_MAP.deleted);
    expect(mapPlatinumState('melting')).toBe('ERROR');
  });

  it('builds an image from a Dockerfile string once and reuses it', async () => {
    const spec = { cpu: 2, memoryGiB: 4, diskGiB: 20 };
    const ref = await provider.buildSnapshot({ key: 'p1', dockerfile: 'FROM ubuntu:24.04\n', spec });
    expect(ref).toBe('singulacomp-p1');
    expect(emulator.imageList().filter((i) => i.name === ref)).toEqual([
      expect.objectContaining({ name: ref, state: 'ready' }),
    ]);
    const images = emulator.imageList().length;
    expect(await provider.buildSnapshot({ key: 'p1', dockerfile: 'FROM ubuntu:24.04\n', spec })).toBe(ref);
    expect(emulator.imageList()).toHaveLength(images);
  });
});
