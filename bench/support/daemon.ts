// A daemon started as a sandbox starts it: its own process, the injected environment, a workspace
// with an OpenCode project pointed at the stub model, and a recording API standing in for the server.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../contract/ports';
import { AGENT_NODE_FLAGS } from '../../image/runtime-layout';
import { startRecordingApi } from '../../test/agent/harness';
import { OFFLINE_OPENCODE_ENV, writeOpencodeProject } from '../../test/fixtures/opencode-project';
import { startStubModel } from '../../test/fixtures/stub-model';

const REPO = join(import.meta.dirname, '..', '..');

/** The bundled daemon, run as the launchers run it. */
export const BUNDLED_DAEMON = [...AGENT_NODE_FLAGS, join(REPO, 'dist', 'singulacomp-agent.mjs')];
/** The same daemon from source through tsx. */
export const SOURCE_DAEMON = ['--import', 'tsx', join(REPO, 'agent', 'main.ts')];

export interface DaemonProcess {
  pid: number;
  servicePort: number;
  opencodePort: number;
  /** Milliseconds from spawn until the service port first answered. */
  startMs: number;
  stop(): Promise<void>;
}

export interface DaemonWorld {
  sessionId: string;
  token: string;
  /** Spawns a daemon (`entry` = node arguments before the daemon's own) and waits until OpenCode is healthy. */
  spawn(entry: readonly string[]): Promise<DaemonProcess>;
  close(): Promise<void>;
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function startDaemonWorld(): Promise<DaemonWorld> {
  const root = await mkdtemp(join(tmpdir(), 'singulacomp-bench-daemon-'));
  const workspace = join(root, 'workspace');
  const stub = await startStubModel();
  await writeOpencodeProject(workspace, { baseURL: stub.baseURL });
  const sessionId = '00000000-0000-4000-8000-000000000001';
  const token = 'bench-token';
  const api = await startRecordingApi({ sessionId });
  const env = {
    ...process.env,
    ...OFFLINE_OPENCODE_ENV,
    SINGULACOMP_SESSION_ID: sessionId,
    SINGULACOMP_BRANCH_NAME: sessionId,
    SINGULACOMP_PROJECT_ID: '00000000-0000-4000-8000-000000000002',
    SINGULACOMP_TOKEN: token,
    SINGULACOMP_API_URL: api.url,
    LOG_LEVEL: 'warn',
  };
  const children = new Set<ChildProcess>();

  async function spawnDaemon(entry: readonly string[]): Promise<DaemonProcess> {
    const servicePort = await freePort();
    const opencodePort = await freePort();
    const startedAt = performance.now();
    const child = spawn(
      process.execPath,
      [
        ...entry,
        '--workspace',
        workspace,
        '--home',
        join(root, 'home'),
        '--opencode-port',
        String(opencodePort),
      ],
      { cwd: REPO, stdio: 'ignore', env: { ...env, SINGULACOMP_SERVICE_PORT: String(servicePort) } },
    );
    children.add(child);
    const stop = async (): Promise<void> => {
      await stopChild(child);
      children.delete(child);
    };
    try {
      let startMs: number | null = null;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const res = await fetch(`http://127.0.0.1:${servicePort}/singulacomp/health`).catch(() => null);
        startMs ??= res ? performance.now() - startedAt : null;
        if (res?.status === 200) break;
        if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}`);
        if (Date.now() > deadline) throw new Error('daemon did not become healthy');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return { pid: child.pid!, servicePort, opencodePort, startMs: Math.round(startMs ?? 0), stop };
    } catch (error) {
      await stop();
      throw error;
    }
  }

  return {
    sessionId,
    token,
    spawn: spawnDaemon,
    async close() {
      await Promise.all([...children].map(stopChild));
      await Promise.all([stub.close(), api.close()]);
      await rm(root, { recursive: true, force: true });
    },
  };
}
