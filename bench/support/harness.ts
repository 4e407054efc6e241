// Shared bench helpers: the result row, the load generator as a child process, and table printing.
import { spawn } from 'node:child_process';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { LoadConfig, LoadResult } from './load';

export { percentile } from './load';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  note?: string;
}

const ROOT = join(import.meta.dirname, '..', '..');

/** Runs bench/support/load.ts in its own Node process and returns what it measured. */
export function runLoad(config: LoadConfig): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        join(ROOT, 'node_modules/tsx/dist/cli.mjs'),
        join(ROOT, 'bench/support/load.ts'),
        JSON.stringify(config),
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator exited with ${code}: ${err}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '') as LoadResult);
      } catch {
        reject(new Error(`load generator printed no result: ${out}${err}`));
      }
    });
  });
}

export const round = (value: number, digits = 2): number => Number(value.toFixed(digits));

/**
 * execArgv for a bench's forked helper process: the loader (tsx) without a profiler flag this
 * process may have been started with, so a profile of this process is the server's alone.
 */
export const childExecArgv = (): string[] => process.execArgv.filter((arg) => !arg.startsWith('--cpu-prof'));

export interface TableRow extends BenchResult {
  module: string;
}

/** One table: module, measurement, value, unit, baseline, ratio, note. */
export function formatTable(rows: TableRow[]): string {
  const header = ['module', 'measurement', 'value', 'unit', 'baseline', 'ratio', 'note'];
  const cells = rows.map((r) => [
    r.module,
    r.name,
    String(r.value),
    r.unit,
    r.baseline === undefined ? '' : String(r.baseline),
    r.baseline ? `${round(r.value / r.baseline, 2)}×` : '',
    r.note ?? '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c
      .map((v, i) => v.padEnd(widths[i]!))
      .join(' | ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('-|-'), ...cells.map(line)].join('\n');
}

/**
 * Runs a bench module on its own (`npx tsx bench/<name>.ts`) and prints its table, as
 * `npm run bench -- <name>` would; does nothing when bench/run.ts imports the module.
 */
export function runIfMain(moduleUrl: string, run: () => Promise<BenchResult[]>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  const module = basename(fileURLToPath(moduleUrl), '.ts');
  run().then(
    (results) => {
      process.stdout.write(`${formatTable(results.map((r) => ({ module, ...r })))}\n`);
      // Bench modules may leave handles (pools, timers) open; the table is the whole output.
      process.exit(0);
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}

/** What warmUntilSteady measured: each warm-up round's cost, in order. */
export interface WarmUp {
  costs: number[];
  /** Whether the last rounds agreed (false: it stopped at maxRounds). */
  steady: boolean;
}

/**
 * Runs warm-up rounds until the server under test has settled: the last `window` rounds' costs
 * (the server's CPU per request or per event, steadier than a latency) lie within `tolerance` of
 * their smallest. A freshly started server's CPU per request falls as V8 compiles its hot paths:
 * per preview GET 419 → 233 → 172 µs over its first three thousand, per reported event 28 → 11 µs
 * over its first thirty thousand. A deployed server is met after that, so its steady state is what
 * a row compares; the modules keep their first round's figure in the note.
 */
export async function warmUntilSteady(
  round: () => Promise<number>,
  options: { window?: number; tolerance?: number; maxRounds?: number } = {},
): Promise<WarmUp> {
  const window = options.window ?? 3;
  const tolerance = options.tolerance ?? 0.15;
  const maxRounds = options.maxRounds ?? 12;
  const costs: number[] = [];
  while (costs.length < maxRounds) {
    costs.push(await round());
    const last = costs.slice(-window);
    if (last.length === window && Math.max(...last) <= Math.min(...last) * (1 + tolerance)) {
      return { costs, steady: true };
    }
  }
  return { costs, steady: false };
}

/** A warm-up's rounds for a bench note: "8 warm-up rounds (server CPU 28 → 11 µs/event)". */
export function describeWarmUp(warm: WarmUp, unit: string, what = 'server CPU'): string {
  const first = Math.round(warm.costs[0] ?? 0);
  const last = Math.round(warm.costs.at(-1) ?? 0);
  return `${warm.costs.length} warm-up rounds${warm.steady ? '' : ' (not yet steady)'} (${what} ${first} → ${last} ${unit})`;
}
