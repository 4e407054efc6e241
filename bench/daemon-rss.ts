// Resident memory of the daemon process at idle (OpenCode healthy, no turn) and its start time,
// started as in a sandbox (the bundled dist/singulacomp-agent.mjs with the injected environment),
// against a bare `node -e` process; the same daemon run from source through tsx is shown beside it.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { AGENT_NODE_FLAGS } from '../image/runtime-layout';
import { BUNDLED_DAEMON, SOURCE_DAEMON, startDaemonWorld, stopChild } from './support/daemon';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

const SETTLE_MS = 3_000;

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? 0);
  return Math.round((kb / 1024) * 10) / 10;
}

export async function run(): Promise<BenchResult[]> {
  const world = await startDaemonWorld();
  const baseline = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });

  /** Starts one daemon, lets it idle once OpenCode is healthy, reads its RSS and stops it. */
  async function measure(entry: readonly string[]): Promise<{ rssMiB: number; startMs: number }> {
    const daemon = await world.spawn(entry);
    try {
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      return { rssMiB: await rssMiB(daemon.pid), startMs: daemon.startMs };
    } finally {
      await daemon.stop();
    }
  }

  try {
    const bundled = await measure(BUNDLED_DAEMON);
    const fromSource = await measure(SOURCE_DAEMON);
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
    await world.close();
  }
}

runIfMain(import.meta.url, run);
