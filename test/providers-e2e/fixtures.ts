// Cloud adapters (real SDKs) pointed at the provider emulators, and the entry command that runs the
// REAL daemon (the bundle dist/singulacomp-agent.mjs that images install, run by plain node) inside an
// emulated sandbox.
//
// Workspace: a real image bakes the entrypoint, which clones the session branch through the API's
// git proxy with SINGULACOMP_TOKEN. The emulators have no image and the tests no git proxy, so the
// entry script stands in for that one step: it clones the session branch straight from the test
// repository's path (a local bare repo) into the emulated sandbox's temp dir, then execs the daemon
// with --workspace/--home in that dir and a free OpenCode port (emulated sandboxes share a host).
// No upstream credential is involved: the test repository has none.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DaytonaProvider } from '../../resolvers/providers/daytona';
import { E2BProvider } from '../../resolvers/providers/e2b';
import type { RetryOptions } from '../../resolvers/providers/errors';
import { PlatinumProvider } from '../../resolvers/providers/platinum';
import type { HardwareSpec, ProviderName, SandboxProvider } from '../../resolvers/providers/types';
import { DaytonaEmulator, type DaytonaTier } from '../emulators/daytona';
import { E2BEmulator } from '../emulators/e2b';
import type { Fault, FaultOptions, RequestRecord } from '../emulators/harness';
import { PlatinumEmulator } from '../emulators/platinum';
import { OFFLINE_OPENCODE_ENV } from '../fixtures/opencode-project';

const ROOT = new URL('../../', import.meta.url).pathname;

/** Fast, bounded retries for tests (no jitter, so delays are the documented ones). */
export const TEST_RETRY: RetryOptions = { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50, jitter: false };

export interface EntryScript {
  command: string;
  remove(): void;
}

/** Writes the daemon entry script for sandboxes cloning from `repositoryPath`. */
export function daemonEntry(repositoryPath: string): EntryScript {
  const dir = mkdtempSync(join(tmpdir(), 'sc-entry-'));
  const file = join(dir, 'entry.sh');
  const node = JSON.stringify(process.execPath);
  // Built from the current agent/ sources by the test run's global setup.
  const agent = JSON.stringify(join(ROOT, 'dist/singulacomp-agent.mjs'));
  // OpenCode stays offline, as in every other test sandbox: without these it also tries the
  // models.dev fetch and a plugin install in the background (about a second of CPU per session).
  const offline = Object.entries(OFFLINE_OPENCODE_ENV)
    .map(([name, value]) => `export ${name}=${JSON.stringify(value)}`)
    .join('\n');
  writeFileSync(
    file,
    `#!/bin/sh
# Emulated sandbox entry: clone the session branch (stand-in for the image's entrypoint), run the daemon.
set -e
${offline}
DIR="$PWD"
git clone -q --branch "$SINGULACOMP_BRANCH_NAME" ${JSON.stringify(repositoryPath)} "$DIR/workspace"
mkdir -p "$DIR/home"
OPENCODE_PORT=$(${node} -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
exec ${node} ${agent} --workspace "$DIR/workspace" --home "$DIR/home" --opencode-port "$OPENCODE_PORT" >>"$DIR/daemon.log" 2>&1
`,
  );
  chmodSync(file, 0o755);
  return { command: `/bin/sh ${file}`, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One emulator behind a uniform face, so tests run the same steps for every provider. */
export interface EmulatedProvider {
  name: Exclude<ProviderName, 'LOCAL'>;
  provider: SandboxProvider;
  /** Ids of live sandboxes. */
  list(): string[];
  /** Native state of a sandbox, or undefined when gone. */
  nativeState(id: string): string | undefined;
  builds(): number;
  requests(): RequestRecord[];
  /** Requests that created a sandbox. */
  createRequests(): RequestRecord[];
  keepAliveRequests(id: string): RequestRecord[];
  /** Path of the create endpoint, for fault injection. */
  createPath: string;
  inject(fault: Fault, options?: FaultOptions): void;
  clearFaults(): void;
  close(): Promise<void>;
}

export interface EmulatorOptions {
  entryCommand: string;
  /** Time an image build takes in the emulator. @default 30 */
  buildDelayMs?: number;
  retry?: RetryOptions;
  /** Daytona: the emulated organization's limits and the adapter's configured caps. */
  daytona?: { tier?: DaytonaTier; caps?: Partial<HardwareSpec> };
  /** E2B: the team's plan (Hobby: 10 GiB disk, Pro: 20). @default 'hobby' */
  e2bPlan?: 'hobby' | 'pro';
}

export async function startDaytona(
  options: EmulatorOptions,
): Promise<EmulatedProvider & { emulator: DaytonaEmulator }> {
  const emulator = await DaytonaEmulator.start({
    snapshotBuildDelayMs: options.buildDelayMs ?? 30,
    ...(options.daytona?.tier ? { tier: options.daytona.tier } : {}),
  });
  const provider = new DaytonaProvider({
    apiKey: emulator.apiKey,
    apiUrl: emulator.apiUrl,
    entryCommand: options.entryCommand,
    ...(options.daytona?.caps ? { caps: options.daytona.caps } : {}),
    retry: options.retry ?? TEST_RETRY,
  });
  return {
    name: 'DAYTONA',
    emulator,
    provider,
    list: () => emulator.list().map((s) => s.id),
    nativeState: (id) => {
      const s = emulator.get(id);
      return s && s.state !== 'destroyed' ? s.state : undefined;
    },
    builds: () => emulator.requestsTo('POST', /^\/api\/snapshots$/).filter((r) => r.status < 300).length,
    requests: () => emulator.requests,
    createRequests: () => emulator.requestsTo('POST', /^\/api\/sandbox$/),
    keepAliveRequests: (id) => emulator.requestsTo('POST', `/api/sandbox/${id}/last-activity`),
    createPath: '/api/sandbox',
    inject: (fault, opts) => emulator.inject(fault, opts),
    clearFaults: () => emulator.clearFaults(),
    close: async () => {
      await provider.close();
      await emulator.close();
    },
  };
}

/** The E2B face also exposes its emulator (template builds, the template a sandbox came from). */
export async function startE2B(
  options: EmulatorOptions,
): Promise<EmulatedProvider & { emulator: E2BEmulator }> {
  // Creates faster than Hobby's one a second: the plan's rate is tested in test/providers/e2b.test.ts.
  const emulator = await E2BEmulator.start({
    templateBuildDelayMs: options.buildDelayMs ?? 30,
    createsPerSecond: 50,
    plan: options.e2bPlan ?? 'hobby',
  });
  const provider = new E2BProvider({
    apiKey: emulator.apiKey,
    apiUrl: emulator.url,
    sandboxUrl: emulator.url,
    domain: emulator.domain,
    hostToUrl: emulator.resolveHost,
    entryCommand: options.entryCommand,
    minCreateIntervalMs: 20,
    plan: options.e2bPlan ?? 'hobby',
    retry: options.retry ?? TEST_RETRY,
  });
  return {
    name: 'E2B',
    emulator,
    provider,
    list: () => emulator.list().map((s) => s.sandboxID),
    nativeState: (id) => emulator.get(id)?.state,
    builds: () => emulator.requestsTo('POST', /^\/(v\d\/)?templates$/).filter((r) => r.status < 300).length,
    requests: () => emulator.requests,
    createRequests: () => emulator.requestsTo('POST', /^\/(v\d\/)?sandboxes$/),
    keepAliveRequests: (id) => emulator.requestsTo('POST', `/sandboxes/${id}/timeout`),
    createPath: '/sandboxes',
    inject: (fault, opts) => emulator.inject(fault, opts),
    clearFaults: () => emulator.clearFaults(),
    close: () => emulator.close(),
  };
}

export async function startPlatinum(
  options: EmulatorOptions,
): Promise<EmulatedProvider & { emulator: PlatinumEmulator }> {
  const emulator = await PlatinumEmulator.start({ imageBuildDelayMs: options.buildDelayMs ?? 30 });
  const provider = new PlatinumProvider({
    apiKey: emulator.apiKey,
    apiUrl: emulator.url,
    entryCommand: options.entryCommand,
    pollIntervalMs: 10,
    retry: options.retry ?? TEST_RETRY,
  });
  return {
    name: 'PLATINUM',
    emulator,
    provider,
    list: () => emulator.list().map((s) => s.id),
    nativeState: (id) => {
      const s = emulator.get(id);
      return s && s.state !== 'deleted' ? s.state : undefined;
    },
    builds: () => emulator.requestsTo('POST', /^\/v1\/images$/).filter((r) => r.status < 300).length,
    requests: () => emulator.requests,
    createRequests: () => emulator.requestsTo('POST', /^\/v1\/sandboxes$/),
    keepAliveRequests: (id) => emulator.requestsTo('POST', `/v1/sandboxes/${id}/keepalive`),
    createPath: '/v1/sandboxes',
    inject: (fault, opts) => emulator.inject(fault, opts),
    clearFaults: () => emulator.clearFaults(),
    close: () => emulator.close(),
  };
}

export const EMULATORS = {
  DAYTONA: startDaytona,
  E2B: startE2B,
  PLATINUM: startPlatinum,
} as const;
