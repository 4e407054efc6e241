// Set-up and the tests every cloud adapter shares, run by test/providers/{daytona,e2b,platinum}.test.ts
// against each provider's emulator: one emulator and adapter per file, a stand-in daemon as the
// entry command, faults cleared and sandboxes destroyed after each test. `conformance()` is the
// provider conformance suite (lifecycle, keep-alive, limits, failures): a new provider is added by
// writing its emulator and passing it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HARDWARE_LIMITS } from '../../image/spec';
import {
  ProviderAuthError,
  ProviderError,
  ProviderNotFoundError,
  ProviderUnavailableError,
  type RetryOptions,
} from '../../resolvers/providers/errors';
import { fitSpecToProvider } from '../../resolvers/providers/limits';
import type { CreateSandboxRequest, HardwareSpec, SandboxProvider } from '../../resolvers/providers/types';
import type { EmulatorBase } from '../emulators/base';
import { fakeDaemonCommand, healthStatus, waitForHealth } from '../emulators/harness';
import { sandboxRequest } from '../emulators/request';

/** Quick retries so outage tests finish fast; no jitter so attempt counts are exact. */
export const TEST_RETRY: RetryOptions = { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50, jitter: false };

type Adapter = SandboxProvider & Required<Pick<SandboxProvider, 'previewHost'>>;

export interface AdapterSuite<E extends EmulatorBase, P extends Adapter, O> {
  readonly emulator: E;
  readonly provider: P;
  /** Entry command that starts the stand-in daemon. */
  readonly entryCommand: string;
  /** A further adapter against the same emulator, with options overridden. */
  make(overrides?: Partial<O>): P;
  /** A create request carrying the label `team: core` and a sandbox token. */
  request(): CreateSandboxRequest;
}

export interface AdapterSuiteConfig<E extends EmulatorBase, P extends Adapter, O> {
  /** Prefix of the temp directory holding the stand-in daemon. */
  name: string;
  start(): Promise<E>;
  make(emulator: E, entryCommand: string, overrides: Partial<O>): P;
  /** Provider ids of the emulator's live sandboxes (destroyed after each test). */
  sandboxIds(emulator: E): string[];
  /** Extra variables in each request's environment. */
  env?: (sessionId: string) => Record<string, string>;
}

/** Registers the file's hooks and hands back its emulator and adapter (set once beforeAll ran). */
export function adapterSuite<E extends EmulatorBase, P extends Adapter, O>(
  config: AdapterSuiteConfig<E, P, O>,
): AdapterSuite<E, P, O> {
  let emulator: E;
  let provider: P;
  let dir: string;
  let entryCommand: string;
  const suite: AdapterSuite<E, P, O> = {
    get emulator() {
      return emulator;
    },
    get provider() {
      return provider;
    },
    get entryCommand() {
      return entryCommand;
    },
    make: (overrides = {}) => config.make(emulator, entryCommand, overrides),
    request: () =>
      sandboxRequest({
        labels: { team: 'core' },
        env: (sessionId) => ({ ...config.env?.(sessionId), SINGULACOMP_TOKEN: 'sandbox-jwt' }),
      }),
  };

  beforeAll(async () => {
    emulator = await config.start();
    dir = mkdtempSync(join(tmpdir(), `${config.name}-test-`));
    entryCommand = fakeDaemonCommand(dir);
    provider = suite.make();
  });

  afterEach(async () => {
    emulator.clearFaults();
    for (const id of config.sandboxIds(emulator)) await provider.destroy(id).catch(() => undefined);
  });

  afterAll(async () => {
    await provider.close?.();
    await emulator.close();
    rmSync(dir, { recursive: true, force: true });
  });

  return suite;
}

type AnySuite = AdapterSuite<EmulatorBase & { list(): unknown[] }, Adapter, { apiKey: string }>;

/** keepAlive's request answered 429 once is retried after Retry-After and then succeeds. */
export function itRetriesRateLimit(
  suite: AnySuite,
  keepAlive: { path: (providerSandboxId: string) => string; okStatus: number },
): void {
  it('retries a 429 after its Retry-After of one second and succeeds', async () => {
    const { providerSandboxId } = await suite.provider.create(suite.request());
    const path = keepAlive.path(providerSandboxId);
    suite.emulator.inject({ kind: 'rate-limit', retryAfterSeconds: 1 }, { path });
    await suite.provider.keepAlive(providerSandboxId);
    const calls = suite.emulator.requestsTo('POST', path);
    expect(calls.map((c) => c.status)).toEqual([429, keepAlive.okStatus]);
    expect((calls[1]?.at ?? 0) - (calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(950);
  });
}

/** A create endpoint that keeps failing is tried maxAttempts times and leaves no sandbox. */
export function itCreatesNothingWhileCreateIsDown(
  suite: AnySuite,
  create: { counted: string | RegExp; faulted: RegExp },
): void {
  it('creates nothing when the create endpoint itself stays down', async () => {
    const before = suite.emulator.requestsTo('POST', create.counted).length;
    suite.emulator.inject(
      { kind: 'server-error', status: 500 },
      { path: create.faulted, times: Number.POSITIVE_INFINITY },
    );
    await expect(suite.provider.create(suite.request())).rejects.toBeInstanceOf(ProviderUnavailableError);
    expect(suite.emulator.requestsTo('POST', create.counted)).toHaveLength(before + 3);
    expect(suite.emulator.list()).toEqual([]);
  });
}

/** A wrong key fails create with ProviderAuthError naming the key's env var, creating nothing. */
export function itReportsRejectedKey(suite: AnySuite, key: { envVar: string; wrong: string }): void {
  it(`reports a rejected API key as ProviderAuthError naming ${key.envVar}`, async () => {
    const wrong = suite.make({ apiKey: key.wrong });
    try {
      const error = await wrong.create(suite.request()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderAuthError);
      expect((error as Error).message).toContain(key.envVar);
      expect(suite.emulator.list()).toEqual([]);
    } finally {
      await wrong.close?.();
    }
  });
}

/** previewHost(id, 3000) is `3000-<id>.<domain>`. */
export function itAnswersPreviewHost(suite: AnySuite, name: string, domain: string): void {
  it(name, async () => {
    const { providerSandboxId } = await suite.provider.create(suite.request());
    expect(await suite.provider.previewHost(providerSandboxId, 3000)).toBe(
      `3000-${providerSandboxId}.${domain}`,
    );
  });
}

/** What the conformance suite needs to know about one provider and its emulator. */
export interface ConformanceProfile<E extends EmulatorBase> {
  keepAlive: { path: (providerSandboxId: string) => string; okStatus: number };
  create: { counted: string | RegExp; faulted: RegExp };
  apiKey: { envVar: string; wrong: string };
  previewDomain: string;
  /** Our state right after stop() (Daytona/Platinum STOPPED, E2B HIBERNATED). */
  stoppedState: 'STOPPED' | 'HIBERNATED';
  /** Whether the service URL needs access headers the provider renews on every start. */
  rotatesServiceHeaders: boolean;
  /** The largest spec the emulated account accepts for one sandbox. */
  accountMax: HardwareSpec;
  /** Resources the emulator recorded for a built snapshot/template. */
  snapshotResources(emulator: E, ref: string): { cpu: number; memoryGiB: number } | undefined;
  /** A snapshot/template reference the provider does not know. */
  unknownSnapshotRef: string;
  /**
   * Holds a sandbox mid-transition: the provider answers "busy" to the first `operation` request,
   * then the transition completes on its own.
   */
  transition?: {
    operation: 'destroy' | 'stop' | 'start';
    /** Path of the request refused while busy. */
    path: (providerSandboxId: string) => RegExp;
    method: string;
    hold(emulator: E, providerSandboxId: string): void;
  };
}

const SELF_CONTAINED_DOCKERFILE = 'FROM ubuntu:24.04\nRUN echo conformance\n';

/** The provider conformance suite: every adapter + emulator pair passes it. */
export function conformance<E extends EmulatorBase & { list(): unknown[] }>(
  suite: AdapterSuite<E, Adapter, { apiKey: string }>,
  profile: ConformanceProfile<E>,
): void {
  describe('conformance: lifecycle', () => {
    it('serves the daemon at serviceUrl with serviceHeaders, survives stop and start, and is gone after destroy', async () => {
      const provider = suite.provider;
      const req = suite.request();
      const created = await provider.create(req);
      expect(created.state).toBe('STARTED');
      const url = created.serviceUrl as string;
      const headers = created.serviceHeaders ?? {};
      expect((await waitForHealth(url, 10_000, headers)).sessionId).toBe(req.sessionId);
      if (profile.rotatesServiceHeaders) {
        expect(Object.keys(headers).length).toBeGreaterThan(0);
        expect(await healthStatus(url)).toBe(401);
      }

      const stopped = await provider.stop(created.providerSandboxId);
      expect(stopped.state).toBe(profile.stoppedState);
      expect(await provider.status(created.providerSandboxId)).toBe(profile.stoppedState);

      const restarted = await provider.start(created.providerSandboxId);
      expect(restarted.state).toBe('STARTED');
      const fresh = restarted.serviceHeaders ?? {};
      expect((await waitForHealth(restarted.serviceUrl as string, 10_000, fresh)).sessionId).toBe(
        req.sessionId,
      );
      if (profile.rotatesServiceHeaders) {
        expect(fresh).not.toEqual(headers);
        expect(await healthStatus(restarted.serviceUrl as string, headers)).toBe(401);
      }

      await provider.destroy(created.providerSandboxId);
      expect(await provider.status(created.providerSandboxId)).toBe('DESTROYED');
      await provider.destroy(created.providerSandboxId);
      expect(suite.emulator.list()).toEqual([]);
    });

    it('stops a sandbox that is already stopped without an error', async () => {
      const { providerSandboxId } = await suite.provider.create(suite.request());
      await suite.provider.stop(providerSandboxId);
      const again = await suite.provider.stop(providerSandboxId);
      expect(again.state).toBe(profile.stoppedState);
      expect(await suite.provider.status(providerSandboxId)).toBe(profile.stoppedState);
    });

    itAnswersPreviewHost(suite, 'answers the preview host of a port', profile.previewDomain);
  });

  describe('conformance: keep-alive', () => {
    it('touches the provider’s inactivity timer on keepAlive', async () => {
      const { providerSandboxId } = await suite.provider.create(suite.request());
      const path = profile.keepAlive.path(providerSandboxId);
      const before = suite.emulator.requestsTo('POST', path).length;
      await suite.provider.keepAlive(providerSandboxId);
      const calls = suite.emulator.requestsTo('POST', path);
      expect(calls).toHaveLength(before + 1);
      expect(calls.at(-1)?.status).toBe(profile.keepAlive.okStatus);
    });

    it('reports keepAlive of a destroyed sandbox as ProviderNotFoundError', async () => {
      const { providerSandboxId } = await suite.provider.create(suite.request());
      await suite.provider.destroy(providerSandboxId);
      await expect(suite.provider.keepAlive(providerSandboxId)).rejects.toBeInstanceOf(ProviderNotFoundError);
    });

    itRetriesRateLimit(suite, profile.keepAlive);
  });

  describe('conformance: limits', () => {
    it('fits the platform’s largest spec to what the account accepts, with a warning per change, and the provider builds and boots it', async () => {
      const largest = {
        cpu: HARDWARE_LIMITS.cpu.max,
        memoryGiB: HARDWARE_LIMITS.memoryGiB.max,
        diskGiB: HARDWARE_LIMITS.diskGiB.max,
      };
      const { spec, warnings } = fitSpecToProvider(suite.provider, largest);
      expect(spec.cpu).toBeLessThanOrEqual(profile.accountMax.cpu);
      expect(spec.memoryGiB).toBeLessThanOrEqual(profile.accountMax.memoryGiB);
      expect(spec.diskGiB).toBeLessThanOrEqual(profile.accountMax.diskGiB);
      const changed = (['cpu', 'memoryGiB', 'diskGiB'] as const).filter((k) => spec[k] !== largest[k]);
      expect(warnings).toHaveLength(changed.length);
      const buildSnapshot = suite.provider.buildSnapshot?.bind(suite.provider);
      if (!buildSnapshot) return;
      const ref = await buildSnapshot({
        key: `limits-${Date.now().toString(36)}`,
        dockerfile: SELF_CONTAINED_DOCKERFILE,
        spec: largest,
      });
      expect(profile.snapshotResources(suite.emulator, ref)).toEqual({
        cpu: spec.cpu,
        memoryGiB: spec.memoryGiB,
      });
      const created = await suite.provider.create({ ...suite.request(), spec, snapshotRef: ref });
      expect(created.state).toBe('STARTED');
    });
  });

  describe('conformance: failures', () => {
    it('fails a create from an unknown snapshot with a typed provider error and leaves nothing behind', async () => {
      const error = await suite.provider
        .create({ ...suite.request(), snapshotRef: profile.unknownSnapshotRef })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect(suite.emulator.list()).toEqual([]);
    });

    itCreatesNothingWhileCreateIsDown(suite, profile.create);
    itReportsRejectedKey(suite, profile.apiKey);

    const transition = profile.transition;
    if (transition) {
      it(`retries ${transition.operation} while the sandbox changes state, until the provider accepts it`, async () => {
        const { providerSandboxId } = await suite.provider.create(suite.request());
        const path = transition.path(providerSandboxId);
        const before = suite.emulator.requestsTo(transition.method, path).length;
        transition.hold(suite.emulator, providerSandboxId);
        await suite.provider[transition.operation](providerSandboxId);
        const statuses = suite.emulator
          .requestsTo(transition.method, path)
          .slice(before)
          .map((r) => r.status);
        expect(statuses).toHaveLength(2);
        expect([400, 409]).toContain(statuses[0]);
        expect(statuses[1]).toBeLessThan(300);
      });
    }
  });
}
