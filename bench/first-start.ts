// The README's Quick start, timed: `npm start` on a fresh data dir (embedded PGlite, first start)
// until its `listening` line, against a bare `node -e` HTTP server reaching its own listening line.
// The same first start from source through tsx (`node --import tsx server/main.ts`) is a second row,
// and the start-up steps' medians (from the server's own log lines) follow. Each process runs in
// its own process group, killed whole after each run so no leftover server skews the next one.
// BENCH_FIRST_START_RUNS sets the runs per command (median; default 5).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../contract/ports';
import { type BenchResult, percentile, runIfMain } from './support/harness';
export type { BenchResult };

const ROOT = join(import.meta.dirname, '..');
const RUNS = Number(process.env.BENCH_FIRST_START_RUNS ?? 5);
const TIMEOUT_MS = 120_000;

interface LogLine {
  msg?: string;
  module?: string;
  time?: number;
}

interface Run {
  /** Spawn → the listening line, wall clock. */
  totalMs: number;
  /** Spawn → each app start-up line (first occurrence), by message. */
  at: Record<string, number>;
}

const BARE_NODE = `require('node:http').createServer().listen(Number(process.env.PORT), '127.0.0.1', () => console.log(JSON.stringify({ module: 'app', msg: 'listening', time: Date.now() })))`;

/** One first start in a new process group on a fresh data dir; the group is killed afterwards. */
async function firstStart(command: string, args: string[]): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), 'singulacomp-bench-start-'));
  const port = await freePort();
  const startedAt = Date.now();
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? tmpdir(),
      PORT: String(port),
      HOST: '127.0.0.1',
      SINGULACOMP_DATA_DIR: dataDir,
    },
  });
  let output = '';
  const at: Record<string, number> = {};
  try {
    const totalMs = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line in ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      child.stdout.on('data', (chunk: Buffer) => {
        const seen = output.length;
        output += chunk.toString();
        const start = output.lastIndexOf('\n', seen) + 1;
        for (const text of output.slice(start).split('\n').slice(0, -1)) {
          if (!text.startsWith('{')) continue;
          const line = JSON.parse(text) as LogLine;
          if (line.module !== 'app' || !line.msg || line.time === undefined) continue;
          at[line.msg] ??= line.time - startedAt;
          if (line.msg === 'listening') {
            clearTimeout(timer);
            resolve(Date.now() - startedAt);
          }
        }
      });
      child.stderr.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited with ${code} before listening:\n${output.slice(-2_000)}`));
      });
    });
    return { totalMs, at };
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    if (child.exitCode === null && child.signalCode === null) await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (values: number[]): number => Math.round(percentile(values, 50));

export async function run(): Promise<BenchResult[]> {
  const ours: Run[] = [];
  const fromSource: Run[] = [];
  const bare: Run[] = [];
  // Interleaved, so a change in the machine's load hits every command alike.
  for (let i = 0; i < RUNS; i++) {
    ours.push(await firstStart('npm', ['start']));
    fromSource.push(await firstStart(process.execPath, ['--import', 'tsx', 'server/main.ts']));
    bare.push(await firstStart(process.execPath, ['-e', BARE_NODE]));
  }
  const bareMs = median(bare.map((r) => r.totalMs));
  /** Median time between two start-up lines (from = null: from spawn). */
  const step = (runs: Run[], from: string | null, to: string) =>
    median(runs.map((r) => (r.at[to] ?? Number.NaN) - (from ? (r.at[from] ?? Number.NaN) : 0)));
  const first = 'database: creating the embedded PostgreSQL (first start only)';
  const steps: Array<[string, string | null, string, string]> = [
    ['spawn → first app line', null, first, 'npm, build checks, loading the server'],
    ['database', first, 'database ready', 'seed copy and open'],
    ['migrations, pub/sub', 'database ready', 'pub/sub ready', ''],
    ['bootstrap admin', 'pub/sub ready', 'bootstrap admin created', 'first admin and its token'],
    ['services → listening', 'bootstrap admin created', 'listening', 'job queue, background services, port'],
  ];
  return [
    {
      name: 'first start: npm start → listening',
      value: median(ours.map((r) => r.totalMs)),
      unit: 'ms',
      baseline: bareMs,
      note: `median of ${RUNS}, fresh data dir; baseline = bare \`node -e\` HTTP server listening`,
    },
    {
      name: 'first start from source (tsx) → listening',
      value: median(fromSource.map((r) => r.totalMs)),
      unit: 'ms',
      baseline: bareMs,
      note: '`node --import tsx server/main.ts`, no npm; baseline as above',
    },
    ...steps.map(([name, from, to, note]) => ({
      name: `  npm start: ${name}`,
      value: step(ours, from, to),
      unit: 'ms',
      baseline: step(fromSource, from, to),
      note: `${note ? `${note}; ` : ''}baseline = the same step from source (tsx)`,
    })),
  ];
}

runIfMain(import.meta.url, run);
