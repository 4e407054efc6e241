// Issue 42's near miss: LOCAL sandboxes outlived the server that created them (its data dir deleted,
// its process gone), running for hours. The real daemon (the bundle LOCAL sandboxes and images run)
// stops itself, and OpenCode with it, once its API has been unreachable for longer than
// SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS, which the LOCAL provider sets to the lease TTL (shortened
// here); while the API answers it keeps running.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { freePort } from '../../contract/ports';
import { pidsWithEnvironment } from '../../resolvers/providers/process-tree';
import { type RecordingApi, startRecordingApi } from '../agent/harness';
import { OFFLINE_OPENCODE_ENV, writeOpencodeProject } from '../fixtures/opencode-project';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import { testRunEnv } from '../support/test-run';
import { waitFor } from '../support/wait';

const AGENT = new URL('../../dist/singulacomp-agent.mjs', import.meta.url).pathname;
const TIMEOUT_MS = 1_500;

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a daemon whose API stays unreachable longer than the lease TTL exits and takes OpenCode with it', async () => {
  const sessionId = randomUUID();
  const root = mkdtempSync(join(tmpdir(), 'sc-self-stop-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const workspace = join(root, 'workspace');
  const stub: StubModel = await startStubModel();
  cleanups.push(() => stub.close());
  await writeOpencodeProject(workspace, { baseURL: stub.baseURL });
  const api: RecordingApi = await startRecordingApi({ sessionId, prompt: null });
  let apiClosed = false;
  cleanups.push(() => (apiClosed ? undefined : api.close()));

  let log = '';
  const daemon: ChildProcess = spawn(
    process.execPath,
    [
      AGENT,
      '--workspace',
      workspace,
      '--home',
      join(root, 'home'),
      '--opencode-port',
      String(await freePort()),
    ],
    {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...OFFLINE_OPENCODE_ENV,
        ...testRunEnv(),
        SINGULACOMP_SESSION_ID: sessionId,
        SINGULACOMP_PROJECT_ID: randomUUID(),
        SINGULACOMP_TOKEN: `sandbox-token-${randomUUID()}`,
        SINGULACOMP_API_URL: api.url,
        SINGULACOMP_SERVICE_PORT: String(await freePort()),
        SINGULACOMP_TELEMETRY_INTERVAL_MS: '300',
        SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS: String(TIMEOUT_MS),
        SINGULACOMP_ATTACHMENT_OFFLOAD: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  daemon.stdout?.on('data', (chunk: Buffer) => {
    log += chunk.toString('utf8');
  });
  daemon.stderr?.on('data', (chunk: Buffer) => {
    log += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => daemon.once('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    for (const pid of await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (daemon.exitCode === null && daemon.signalCode === null) await exited;
  });

  // OpenCode is up: its process carries the session's environment.
  await waitFor(
    () => api.of('reportRuntimeState').some((call) => call.input.state === 'HEALTHY'),
    60_000,
    'OpenCode healthy',
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${log.slice(-3_000)}`);
  });
  const opencode = await waitFor(async () => {
    const pids = await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId);
    return pids.find((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('serve');
      } catch {
        return false;
      }
    });
  }, 30_000);

  // While the API answers, the daemon keeps running well past the timeout.
  await waitFor(() => {
    const reports = api.of('reportTelemetry');
    return reports.length >= 2 && reports.at(-1)!.at - reports[0]!.at > 3 * TIMEOUT_MS;
  }, 60_000);
  expect(daemon.exitCode, log).toBeNull();
  expect(alive(opencode)).toBe(true);

  // The control plane goes away.
  apiClosed = true;
  await api.close();
  const code = await waitFor(
    async () => (daemon.exitCode !== null ? daemon.exitCode : null),
    60_000,
    'the exit',
  );
  expect(code, log).toBe(3);
  expect(log).toContain('control plane unreachable for longer than the lease lifetime');
  await waitFor(() => !alive(opencode), 30_000, 'OpenCode to end');
  expect(await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)).toEqual([]);
});
