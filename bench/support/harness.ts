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
