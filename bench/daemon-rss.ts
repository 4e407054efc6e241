// Resident memory of the daemon process at idle (OpenCode healthy, no turn) and its start time,
// started as in a sandbox (the bundled dist/singulacomp-agent.mjs with the injected environment),
// against a bare `node -e` process; the same daemon run from source through tsx is shown beside it.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../contract/ports';
import { AGENT_NODE_FLAGS } from '../image/runtime-layout';
import { startRecordingApi } from '../test/agent/harness';
import { OFFLINE_OPENCODE_ENV, writeOpencodeProject } from '../test/fixtures/opencode-project';
import { startStubModel } from '../test/fixtures/stub-model';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

const SETTLE_MS = 3_000;

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? 0);
  return Math.round((kb / 1024) * 10) / 10;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function run(): Promise<BenchResult[]> {
  const root = await mkdtemp(join(tmpdir(), 'singulacomp-bench-rss-'));
  const workspace = join(root, 'workspace');
  const stub = await startStubModel();
  await writeOpencodeProject(workspace, { baseURL: stub.baseURL });
  const sessionId = '00000000-0000-4000-8000-000000000001';
  const api = await startRecordingApi({ sessionId });
  const baseline = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  const repo = join(import.meta.dirname, '..');
  const env = {
    ...process.env,
    ...OFFLINE_OPENCODE_ENV,
    SINGULACOMP_SESSION_ID: sessionId,
    SINGULACOMP_BRANCH_NAME: sessionId,
    SINGULACOMP_PROJECT_ID: '00000000-0000-4000-8000-000000000002',
    SINGULACOMP_TOKEN: 'bench-token',
    SINGULACOMP_API_URL: api.url,
    LOG_LEVEL: 'warn',
  };

  /** Starts one daemon; resolves once its service port answers and OpenCode is healthy, then idles. */
  async function measure(entry: string[]): Promise<{ rssMiB: number; startMs: number }> {
    const servicePort = await freePort();
    const startedAt = performance.now();
    const daemon = spawn(
      process.execPath,
      [
        ...entry,
        '--workspace',
        workspace,
        '--home',
        join(root, 'home'),
        '--opencode-port',
        String(await freePort()),
      ],
      { cwd: repo, stdio: 'ignore', env: { ...env, SINGULACOMP_SERVICE_PORT: String(servicePort) } },
    );
    try {
      let startMs: number | null = null;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const res = await fetch(`http://127.0.0.1:${servicePort}/singulacomp/health`).catch(() => null);
        startMs ??= res ? performance.now() - startedAt : null;
        if (res?.status === 200) break;
        if (Date.now() > deadline) throw new Error('daemon did not become healthy');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      return { rssMiB: await rssMiB(daemon.pid!), startMs: Math.round(startMs ?? 0) };
    } finally {
      await stopChild(daemon);
    }
  }

  try {
    const bundled = await measure([...AGENT_NODE_FLAGS, join(repo, 'dist', 'singulacomp-agent.mjs')]);
    const fromSource = await measure(['--import', 'tsx', join(repo, 'agent', 'main.ts')]);
    const nodeRss = await rssMiB(baseline.pid!);
    return [
      {
        name: 'daemon RSS at idle',
        value: bundled.rssMiB,
        unit: 'MiB',
        baseline: nodeRss,
        note: `bundled daemon run as the launchers run it (${AGENT_NODE_FLAGS.join(' ')}), OpenCode healthy and idle; baseline = bare \`node -e\`; from source via tsx: ${fromSource.rssMiB} MiB`,
      },
      {
        name: 'daemon start (spawn → service port answers)',
        value: bundled.startMs,
        unit: 'ms',
        baseline: fromSource.startMs,
        note: 'bundled daemon; baseline = the same daemon from source via tsx',
      },
    ];
  } finally {
    await stopChild(baseline);
    await Promise.all([stub.close(), api.close()]);
    await rm(root, { recursive: true, force: true });
  }
}

runIfMain(import.meta.url, run);
