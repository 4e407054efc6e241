// CPU profile of the nested sessions page (bench/api.ts's SESSIONS_PAGE): starts the app in-process
// as bench/api.ts does, seeds the page, warms up, then profiles the server process while the load
// generator (its own process, so its frames stay out) runs the query one request at a time.
// Prints the top self-time frames (V8's sampling profiler, the one behind --cpu-prof) and writes
// the .cpuprofile for a viewer.
//   npx tsx bench/profile-page.ts [iterations=300] [top=5] [out=<tmpdir>/sessions-page.cpuprofile]
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startTestApp } from '../test/support/app';
import { createTestRepo } from '../test/support/git';
import { runLoad } from './support/harness';
import { SESSIONS_PAGE, instantProvider, seedSessionsPage } from './support/sessions-page';

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

export interface Frame {
  frame: string;
  selfMs: number;
  percent: number;
}

/** Self time per function (name + file + line), summed over every node of the call tree. */
export function selfTimes(profile: CpuProfile): { frames: Frame[]; totalMs: number } {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0; // a sample's time runs until the next one
    const cf = byNode.get(id);
    if (!cf || cf.functionName === '(idle)') return;
    const file = cf.url.replace(/^file:\/\//, '').replace(`${process.cwd()}/`, '');
    const key = cf.url ? `${cf.functionName || '(anonymous)'} ${file}:${cf.lineNumber + 1}` : cf.functionName;
    self.set(key, (self.get(key) ?? 0) + us);
    total += us;
  });
  const frames = [...self]
    .map(([frame, us]) => ({ frame, selfMs: us / 1_000, percent: (100 * us) / total }))
    .sort((a, b) => b.selfMs - a.selfMs);
  return { frames, totalMs: total / 1_000 };
}

/** The profiler's pseudo-frames: time in no function of ours. */
const VM_STATES = new Set(['(garbage collector)', '(program)', '(root)']);

async function main(): Promise<void> {
  const iterations = Number(process.argv[2] ?? 300);
  const top = Number(process.argv[3] ?? 5);
  const out = process.argv[4] ?? join(tmpdir(), 'sessions-page.cpuprofile');
  const repo = createTestRepo({ 'README.md': '# bench\n' });
  const t = await startTestApp({ providers: [instantProvider()] });
  try {
    await seedSessionsPage(t, repo.url, 120);
    const load = {
      url: t.graphqlUrl,
      body: JSON.stringify({ query: SESSIONS_PAGE, variables: { first: 100 } }),
      headers: { authorization: `Bearer ${t.adminToken}` },
      concurrency: 1,
    };
    const warm = await runLoad({ ...load, count: 30 });
    if (warm.failures > 0) throw new Error(`sessions page failed: ${warm.firstFailure}`);
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const measured = await runLoad({ ...load, count: iterations });
    const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
    session.disconnect();
    if (measured.failures > 0) throw new Error(`sessions page failed: ${measured.firstFailure}`);
    writeFileSync(out, JSON.stringify(profile));
    const { frames, totalMs } = selfTimes(profile);
    process.stdout.write(
      `${iterations} pages, p50 ${measured.p50Ms.toFixed(1)} ms; ${totalMs.toFixed(0)} ms busy (idle excluded); ${out}\n`,
    );
    const js = frames.filter((f) => !VM_STATES.has(f.frame));
    const meta = frames.filter((f) => VM_STATES.has(f.frame));
    process.stdout.write(`${meta.map((f) => `${f.frame} ${f.percent.toFixed(1)}%`).join(', ')}\n`);
    printTopFrames(js, top);
  } finally {
    await t.stop();
    repo.remove();
  }
}

export function printTopFrames(frames: readonly Frame[], top: number): void {
  process.stdout.write(`top ${top} frames by self time:\n`);
  for (const f of frames.slice(0, top)) {
    process.stdout.write(
      `  ${f.percent.toFixed(1).padStart(5)}%  ${f.selfMs.toFixed(0).padStart(6)} ms  ${f.frame}\n`,
    );
  }
}

/** Runs a profiling script's main when the file is run directly, and exits (pools stay open). */
export function runProfileIfMain(moduleUrl: string, main: () => Promise<void>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}

runProfileIfMain(import.meta.url, main);
