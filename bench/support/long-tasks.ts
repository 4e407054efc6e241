// `tsx bench/support/long-tasks.ts profile.cpuprofile [minMs] [tasks]`: the event loop's long tasks
// in a `--cpu-prof` profile. A task is a run of consecutive samples that are not `(idle)`; for each
// of the longest it prints the duration and the stacks that filled it (the innermost frames, with
// the project's own frames marked), then the frames that filled all tasks over minMs together.
//
// Not a bench module: bench/run.ts imports every bench file, so nothing here runs on import.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '~/');
  const short = file.includes('~/')
    ? file
    : file.replace(/^.*?\/(server|agent|contract|bench|test)\//, '$1/');
  return `${functionName || '(anonymous)'}${url ? ` ${short}:${lineNumber + 1}` : ''}`;
}

function main(): void {
  const [file, minArg, tasksArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: long-tasks.ts profile.cpuprofile [minMs] [tasks]');
  const minMs = Number(minArg ?? 50);
  const show = Number(tasksArg ?? 8);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOf = (id: number): ProfileNode[] => {
    const stack: ProfileNode[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(byId.get(at)!);
    return stack; // innermost first
  };
  // A sample's duration is the delta to the next sample.
  const samples = profile.samples.map((id, i) => ({ id, us: profile.timeDeltas[i + 1] ?? 0 }));
  const tasks: Array<{ startMs: number; ms: number; ids: Array<{ id: number; us: number }> }> = [];
  let clock = profile.startTime;
  let current: (typeof tasks)[number] | null = null;
  for (let i = 0; i < samples.length; i++) {
    clock += profile.timeDeltas[i] ?? 0;
    const s = samples[i]!;
    const idle = byId.get(s.id)?.callFrame.functionName === '(idle)';
    if (idle) {
      if (current && current.ms >= minMs) tasks.push(current);
      current = null;
      continue;
    }
    current ??= { startMs: (clock - profile.startTime) / 1000, ms: 0, ids: [] };
    current.ms += s.us / 1000;
    current.ids.push(s);
  }
  if (current && current.ms >= minMs) tasks.push(current);
  const total = (profile.timeDeltas.reduce((a, b) => a + b, 0) / 1e6).toFixed(0);
  process.stdout.write(`${tasks.length} tasks of ≥ ${minMs} ms in ${total} s of profile\n`);
  const describe = (ids: Array<{ id: number; us: number }>, rows: number, depth: number) => {
    const stacks = new Map<string, number>();
    for (const { id, us } of ids) {
      const key = stackOf(id)
        .filter((n) => n.callFrame.functionName !== '(root)')
        .slice(0, depth)
        .map(frameName)
        .join('\n        < ');
      stacks.set(key, (stacks.get(key) ?? 0) + us / 1000);
    }
    for (const [key, ms] of [...stacks].sort((a, b) => b[1] - a[1]).slice(0, rows))
      process.stdout.write(`  ${ms.toFixed(0).padStart(5)} ms  ${key}\n`);
  };
  for (const task of [...tasks].sort((a, b) => b.ms - a.ms).slice(0, show)) {
    process.stdout.write(`\ntask at ${(task.startMs / 1000).toFixed(1)} s: ${task.ms.toFixed(0)} ms\n`);
    describe(task.ids, 4, 10);
  }
  // Project frames (outside node_modules) anywhere on the stack, over all long tasks.
  const inclusive = new Map<string, number>();
  for (const task of tasks)
    for (const { id, us } of task.ids) {
      const seen = new Set<string>();
      for (const n of stackOf(id)) {
        const name = frameName(n);
        if (seen.has(name) || !n.callFrame.url) continue;
        seen.add(name);
        inclusive.set(name, (inclusive.get(name) ?? 0) + us / 1000);
      }
    }
  process.stdout.write(`\nframes on the stack in long tasks (inclusive ms):\n`);
  for (const [name, ms] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 40))
    process.stdout.write(`  ${ms.toFixed(0).padStart(6)}  ${name}\n`);
}

const entry = process.argv[1] ? resolve(process.argv[1]) : '';
if (entry === fileURLToPath(import.meta.url)) main();
