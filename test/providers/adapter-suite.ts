// Set-up and the tests every cloud adapter shares, run by test/providers/{daytona,e2b,platinum}.test.ts
// against each provider's emulator: one emulator and adapter per file, a stand-in daemon as the
// entry command, faults cleared and sandboxes destroyed after each test.
//
// The provider conformance suite has two halves:
// - `contractChecks(target, profile)`: what an adapter promises, observed only through the adapter
//   and the sandbox's service URL. It runs against an emulator here and against the real service in
//   test/providers/conformance-real.test.ts (when that provider's key and URL are set).
// - `emulatorChecks(suite, profile)`: what needs the emulator's insides (its request log, injected
//   faults, held transitions, the sandboxes it holds).
// `conformance(suite, profile)` runs both against an emulator. An adapter without an emulator (a
// local runtime) calls `contractChecks` with a target of its own: DOCKER runs it against a real
// engine (test/docker/conformance.test.ts), its profile supplying the base image its Dockerfiles
// start FROM, the credentials its engine refuses and where its previews are served.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HARDWARE_LIMITS } from '../../image/spec';
import {
  ProviderAuthError,
  ProviderNotFoundError,
  ProviderSnapshotUnusableError,
  ProviderUnavailableError,
  type RetryOptions,
} from '../../resolvers/providers/errors';
import { fitSpecToProvider } from '../../resolvers/providers/limits';
import type {
  CreateSandboxRequest,
  HardwareSpec,
  ProviderSandbox,
  SandboxProvider,
} from '../../resolvers/providers/types';
import type { EmulatorBase } from '../emulators/base';
import { fakeDaemonCommand, healthStatus, waitForHealth } from '../emulators/harness';
import { sandboxRequest } from '../emulators/request';

/** Quick retries so outage tests finish fast; no jitter so attempt counts are exact. */
export const TEST_RETRY: RetryOptions = { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50, jitter: false };

export type Adapter = SandboxProvider & Required<Pick<SandboxProvider, 'previewHost'>>;

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

/** What the contract checks need: an adapter, a way to make another, and create requests. */
export interface ContractTarget {
  readonly provider: Adapter;
  /** A further adapter of the same provider with another API key (closed by the check). */
  make?(overrides: { apiKey: string }): Adapter;
  /** A create request with fresh ids. */
  request(): CreateSandboxRequest;
}

/**
 * Credentials the provider refuses, for a provider whose credentials are not an API key (a Docker
 * Engine's are the TLS client certificate of a tcp DOCKER_HOST): what they are, the adapter holding
 * them (closed by the check) and the variable the ProviderAuthError names.
 */
export interface RefusedCredentials {
  what: string;
  envVar: string;
  make(): Adapter;
}

/** What the contract checks know about one provider. */
export interface ContractProfile {
  /** A wrong API key, passed to `make` (cloud providers). */
  apiKey?: { envVar: string; wrong: string };
  /** Instead of `apiKey`: how the provider's own kind of credentials is refused. */
  refusedCredentials?: RefusedCredentials;
  /**
   * The Dockerfile a check builds (it must build without a registry where none is reachable).
   * @default `FROM ubuntu:24.04`, one RUN step
   */
  dockerfile?: string;
  /** Domain of `previewHost` (`<port>-<id>.<domain>`); unset: any domain. */
  previewDomain?: string;
  /**
   * The preview host a sandbox answers for a port, when the provider serves previews through the
   * daemon's service address rather than a `<port>-<id>.<domain>` host (DOCKER: the loopback
   * address the service URL points at). Unset: `<port>-<id>.<previewDomain>`.
   */
  expectedPreviewHost?: (sandbox: ProviderSandbox, port: number) => string;
  /** Our state right after stop() (Daytona/Platinum STOPPED, E2B HIBERNATED). */
  stoppedState: 'STOPPED' | 'HIBERNATED';
  /**
   * The service URL needs access headers the provider renews on every start; without them the
   * provider answers `refusedStatus` (Daytona: 307 to its sign-in page). Null: no headers.
   */
  serviceAccess: { refusedStatus: number } | null;
  /** The largest spec the account accepts for one sandbox. */
  accountMax: HardwareSpec;
  /** A snapshot/template reference the provider does not know. */
  unknownSnapshotRef: string;
  /** Per-test timeout (a real service boots and builds for minutes). @default vitest's */
  timeoutMs?: number;
}

/** What the emulator-internal checks need to know about one provider's emulator. */
export interface EmulatorProfile<E extends EmulatorBase> {
  keepAlive: { path: (providerSandboxId: string) => string; okStatus: number };
  create: { counted: string | RegExp; faulted: RegExp };
  /** Resources the emulator recorded for a built snapshot/template. */
  snapshotResources(emulator: E, ref: string): { cpu: number; memoryGiB: number } | undefined;
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

/** What the whole conformance suite needs about one provider and its emulator. */
export type ConformanceProfile<E extends EmulatorBase> = ContractProfile & EmulatorProfile<E>;

const SELF_CONTAINED_DOCKERFILE = 'FROM ubuntu:24.04\nRUN echo conformance\n';

const largestSpec = (): HardwareSpec => ({
  cpu: HARDWARE_LIMITS.cpu.max,
  memoryGiB: HARDWARE_LIMITS.memoryGiB.max,
  diskGiB: HARDWARE_LIMITS.diskGiB.max,
});

/**
 * The provider contract, observed through the adapter alone: every adapter passes it against its
 * emulator, and against the real service when credentials are given. Sandboxes a check creates are
 * destroyed after it.
 */
export function contractChecks(target: () => ContractTarget, profile: ContractProfile): void {
  const created: string[] = [];
  const timeout = profile.timeoutMs;
  const create = async (request: CreateSandboxRequest) => {
    const sandbox = await target().provider.create(request);
    created.push(sandbox.providerSandboxId);
    return sandbox;
  };

  afterEach(async () => {
    for (const id of created.splice(0))
      await target()
        .provider.destroy(id)
        .catch(() => undefined);
  });

  describe('contract: lifecycle', () => {
    it('serves the daemon at serviceUrl with serviceHeaders, survives stop and start, and is gone after destroy', {
      timeout,
    }, async () => {
      const provider = target().provider;
      const req = target().request();
      const sandbox = await create(req);
      expect(sandbox.state).toBe('STARTED');
      const url = sandbox.serviceUrl as string;
      const headers = sandbox.serviceHeaders ?? {};
      expect((await waitForHealth(url, 60_000, headers)).sessionId).toBe(req.sessionId);
      if (profile.serviceAccess) {
        expect(Object.keys(headers).length).toBeGreaterThan(0);
        expect(await healthStatus(url)).toBe(profile.serviceAccess.refusedStatus);
      }

      const stopped = await provider.stop(sandbox.providerSandboxId);
      expect(stopped.state).toBe(profile.stoppedState);
      expect(await provider.status(sandbox.providerSandboxId)).toBe(profile.stoppedState);

      const restarted = await provider.start(sandbox.providerSandboxId);
      expect(restarted.state).toBe('STARTED');
      const fresh = restarted.serviceHeaders ?? {};
      expect((await waitForHealth(restarted.serviceUrl as string, 60_000, fresh)).sessionId).toBe(
        req.sessionId,
      );
      if (profile.serviceAccess) {
        expect(fresh).not.toEqual(headers);
        expect(await healthStatus(restarted.serviceUrl as string, headers)).toBe(
          profile.serviceAccess.refusedStatus,
        );
      }

      await provider.destroy(sandbox.providerSandboxId);
      expect(await provider.status(sandbox.providerSandboxId)).toBe('DESTROYED');
      await provider.destroy(sandbox.providerSandboxId);
    });

    it('stops a sandbox that is already stopped without an error', { timeout }, async () => {
      const { providerSandboxId } = await create(target().request());
      await target().provider.stop(providerSandboxId);
      const again = await target().provider.stop(providerSandboxId);
      expect(again.state).toBe(profile.stoppedState);
      expect(await target().provider.status(providerSandboxId)).toBe(profile.stoppedState);
    });

    it('answers the preview host of a port', { timeout }, async () => {
      const sandbox = await create(target().request());
      const { providerSandboxId } = sandbox;
      const host = await target().provider.previewHost(providerSandboxId, 3000);
      if (profile.expectedPreviewHost) expect(host).toBe(profile.expectedPreviewHost(sandbox, 3000));
      else if (profile.previewDomain) expect(host).toBe(`3000-${providerSandboxId}.${profile.previewDomain}`);
      else expect(host.startsWith(`3000-${providerSandboxId}.`)).toBe(true);
    });
  });

  describe('contract: keep-alive', () => {
    it('keeps a running sandbox alive, and reports keepAlive of a destroyed one as ProviderNotFoundError', {
      timeout,
    }, async () => {
      const { providerSandboxId } = await create(target().request());
      await target().provider.keepAlive(providerSandboxId);
      expect(await target().provider.status(providerSandboxId)).toBe('STARTED');
      await target().provider.destroy(providerSandboxId);
      await expect(target().provider.keepAlive(providerSandboxId)).rejects.toBeInstanceOf(
        ProviderNotFoundError,
      );
    });
  });

  describe('contract: limits', () => {
    it('fits the platform’s largest spec to what the account accepts, with a warning per change, and the provider builds and boots it', {
      timeout,
    }, async () => {
      const largest = largestSpec();
      const { spec, warnings } = fitSpecToProvider(target().provider, largest);
      expect(spec.cpu).toBeLessThanOrEqual(profile.accountMax.cpu);
      expect(spec.memoryGiB).toBeLessThanOrEqual(profile.accountMax.memoryGiB);
      expect(spec.diskGiB).toBeLessThanOrEqual(profile.accountMax.diskGiB);
      const changed = (['cpu', 'memoryGiB', 'diskGiB'] as const).filter((k) => spec[k] !== largest[k]);
      expect(warnings).toHaveLength(changed.length);
      const buildSnapshot = target().provider.buildSnapshot?.bind(target().provider);
      if (!buildSnapshot) return;
      const ref = await buildSnapshot({
        key: `limits-${Date.now().toString(36)}`,
        dockerfile: profile.dockerfile ?? SELF_CONTAINED_DOCKERFILE,
        spec: largest,
      });
      const sandbox = await create({ ...target().request(), spec, snapshotRef: ref });
      expect(sandbox.state).toBe('STARTED');
    });
  });

  describe('contract: failures', () => {
    it('fails a create from an unknown snapshot with ProviderSnapshotUnusableError, so the snapshot is rebuilt', {
      timeout,
    }, async () => {
      const error = await create({ ...target().request(), snapshotRef: profile.unknownSnapshotRef }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ProviderSnapshotUnusableError);
      expect((error as ProviderSnapshotUnusableError).snapshotRef).toBe(profile.unknownSnapshotRef);
    });

    const refused: RefusedCredentials | null =
      profile.refusedCredentials ??
      (profile.apiKey
        ? {
            what: 'a rejected API key',
            envVar: profile.apiKey.envVar,
            make: () => {
              const t = target();
              if (!t.make) throw new Error('a target with an apiKey profile makes further adapters');
              return t.make({ apiKey: profile.apiKey?.wrong ?? '' });
            },
          }
        : null);
    if (!refused) throw new Error('a contract profile names apiKey or refusedCredentials');
    it(`reports ${refused.what} as ProviderAuthError naming ${refused.envVar}`, { timeout }, async () => {
      const wrong = refused.make();
      try {
        const error = await wrong.create(target().request()).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ProviderAuthError);
        expect((error as Error).message).toContain(refused.envVar);
      } finally {
        await wrong.close?.();
      }
    });
  });
}

/** The checks that need the emulator's insides: request logs, injected faults, held transitions. */
export function emulatorChecks<E extends EmulatorBase & { list(): unknown[] }>(
  suite: AdapterSuite<E, Adapter, { apiKey: string }>,
  profile: EmulatorProfile<E>,
): void {
  describe('emulator: keep-alive', () => {
    it('touches the provider’s inactivity timer on keepAlive', async () => {
      const { providerSandboxId } = await suite.provider.create(suite.request());
      const path = profile.keepAlive.path(providerSandboxId);
      const before = suite.emulator.requestsTo('POST', path).length;
      await suite.provider.keepAlive(providerSandboxId);
      const calls = suite.emulator.requestsTo('POST', path);
      expect(calls).toHaveLength(before + 1);
      expect(calls.at(-1)?.status).toBe(profile.keepAlive.okStatus);
    });

    itRetriesRateLimit(suite, profile.keepAlive);
  });

  describe('emulator: limits', () => {
    it('builds the snapshot with the fitted spec', async () => {
      const buildSnapshot = suite.provider.buildSnapshot?.bind(suite.provider);
      if (!buildSnapshot) return;
      const { spec } = fitSpecToProvider(suite.provider, largestSpec());
      const ref = await buildSnapshot({
        key: `fitted-${Date.now().toString(36)}`,
        dockerfile: SELF_CONTAINED_DOCKERFILE,
        spec: largestSpec(),
      });
      expect(profile.snapshotResources(suite.emulator, ref)).toEqual({
        cpu: spec.cpu,
        memoryGiB: spec.memoryGiB,
      });
    });
  });

  describe('emulator: failures', () => {
    it('leaves no sandbox behind a create from an unknown snapshot or with a rejected key', async () => {
      await suite.provider
        .create({ ...suite.request(), snapshotRef: 'singulacomp-never-built' })
        .catch(() => undefined);
      const wrong = suite.make({ apiKey: 'wrong-key' } as never);
      try {
        await wrong.create(suite.request()).catch(() => undefined);
      } finally {
        await wrong.close?.();
      }
      expect(suite.emulator.list()).toEqual([]);
    });

    itCreatesNothingWhileCreateIsDown(suite, profile.create);

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

/** The provider conformance suite against an emulator: the contract, then the emulator's insides. */
export function conformance<E extends EmulatorBase & { list(): unknown[] }>(
  suite: AdapterSuite<E, Adapter, { apiKey: string }>,
  profile: ConformanceProfile<E>,
): void {
  contractChecks(() => suite, profile);
  emulatorChecks(suite, profile);
}
