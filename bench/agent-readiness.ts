// Agent readiness on LOCAL with the real daemon and a real `opencode serve` (stub model): how long
// from createSession until the agent can take a turn (agentReady), over RUNS sessions one after
// another, split into where the time goes: the mutation, provisioning (clone, sandbox, entry start:
// create → RUNNING), the daemon's start (RUNNING → its first runtime report) and OpenCode's start
// (first report → HEALTHY). Baseline in the same run: a bare `opencode serve` in a clone of the
// sessions' repository (the workspace every sandbox has, and what a user runs in a checkout),
// spawn → /global/health healthy, which no sandbox can beat. A second row gives a bare start in a
// directory holding only the OpenCode config, as the baseline was before: OpenCode skips its git
// project detection there, so it is the lower floor.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../contract/ports';
import { createLogger } from '../agent/logger';
import { OpencodeProcess, resolveOpencodeBin } from '../agent/opencode';
import { startE2e } from '../test/e2e/helpers';
import { OFFLINE_OPENCODE_ENV, writeOpencodeProject } from '../test/fixtures/opencode-project';
import { CreateSessionDocument, StopSessionDocument } from '../test/generated/graphql';
import { createProject } from '../test/leases/helpers';
import { type BenchResult, percentile, round } from './support/harness';

const RUNS = 10;
const POLL_MS = 20;
const READY_STATES = new Set(['HEALTHY', 'IDLE', 'BUSY']);

interface Timeline {
  answered: number;
  running: number;
  daemon: number;
  ready: number;
}

async function until<T>(check: () => Promise<T | null | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Where a bare start runs: a clone of the sessions' repository, or a directory with its config only. */
type BareWorkspace = { clone: string } | { configOnly: string };

/**
 * Spawn → healthy of a bare `opencode serve` on the same config, the floor of any sandbox: the
 * daemon's own OpenCode process and health poll (OpencodeProcess), without the daemon around it.
 * The workspace is prepared before the clock starts.
 */
async function bareOpencode(where: BareWorkspace): Promise<number> {
  const root = await mkdtemp(join(tmpdir(), 'singulacomp-bench-ready-'));
  const workspace = join(root, 'workspace');
  if ('clone' in where) await promisify(execFile)('git', ['clone', '-q', where.clone, workspace]);
  else await writeOpencodeProject(workspace, { baseURL: where.configOnly });
  await mkdir(join(root, 'home'), { recursive: true });
  const port = await freePort();
  const started = performance.now();
  const proc = new OpencodeProcess({
    bin: resolveOpencodeBin(),
    port,
    workspace,
    home: join(root, 'home'),
    configDir: join(workspace, '.singulacomp', 'opencode'),
    env: { ...OFFLINE_OPENCODE_ENV },
    logger: createLogger('silent'),
  });
  try {
    await proc.waitHealthy(180_000, POLL_MS);
    return performance.now() - started;
  } finally {
    proc.signal('SIGKILL');
    await proc.exited;
    await rm(root, { recursive: true, force: true });
  }
}

export async function run(): Promise<BenchResult[]> {
  const e = await startE2e({ daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
  try {
    const projectId = await createProject(e.t, e.repo.url);
    const db = e.t.app.services.db;
    const timelines: Timeline[] = [];
    const bare: number[] = [];
    const bareConfigOnly: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const res = await e.t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const sessionId = res.data.createSession.session.sessionId;
      const answered = performance.now() - started;
      const seen: Partial<Timeline> = { answered };
      await until(
        async () => {
          const s = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
          if (s?.status === 'FAILED') throw new Error(`session failed: ${s.failureReason}`);
          const at = performance.now() - started;
          if (s?.status === 'RUNNING') seen.running ??= at;
          if (seen.running !== undefined && s?.sandbox?.runtimeState) seen.daemon ??= at;
          if (seen.daemon !== undefined && READY_STATES.has(s?.sandbox?.runtimeState ?? ''))
            seen.ready ??= at;
          return seen.ready;
        },
        `session ${i + 1} to be ready`,
      );
      timelines.push(seen as Timeline);
      const stopped = await e.t.request(StopSessionDocument, { input: { sessionId } });
      if (stopped.data?.stopSession.__typename !== 'StopSessionSuccess')
        throw new Error(JSON.stringify(stopped));
      // The same machine state for the floors: one bare OpenCode start of each kind per session.
      bare.push(await bareOpencode({ clone: e.repo.url }));
      bareConfigOnly.push(await bareOpencode({ configOnly: e.stub.baseURL }));
    }
    const p = (pick: (t: Timeline) => number, q: number) => round(percentile(timelines.map(pick), q), 0);
    const phase = (name: string, pick: (t: Timeline) => number): BenchResult => ({
      name: `agent readiness: ${name} p50`,
      value: p(pick, 50),
      unit: 'ms',
      note: `p95 ${p(pick, 95)} ms`,
    });
    return [
      {
        name: `agent readiness: create → agentReady p50 (LOCAL, real OpenCode, ${RUNS} sessions)`,
        value: p((t) => t.ready, 50),
        unit: 'ms',
        baseline: round(percentile(bare, 50), 0),
        note: `p95 ${p((t) => t.ready, 95)} ms; baseline = bare \`opencode serve\` in a clone of the same repository, spawn → healthy; goal p50 ≤ 5000 ms`,
      },
      {
        name: 'agent readiness: create → agentReady p50 vs a config-only directory',
        value: p((t) => t.ready, 50),
        unit: 'ms',
        baseline: round(percentile(bareConfigOnly, 50), 0),
        note: 'baseline = bare `opencode serve` in a directory holding only its config (no git repository), spawn → healthy',
      },
      phase('createSession answered', (t) => t.answered),
      phase('answered → RUNNING (clone, sandbox, entry)', (t) => t.running - t.answered),
      phase("RUNNING → the daemon's first report", (t) => t.daemon - t.running),
      phase('first report → OpenCode healthy', (t) => t.ready - t.daemon),
    ];
  } finally {
    await e.stop();
  }
}
