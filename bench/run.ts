// `npm run bench`: runs every bench/<name>.ts module's exported run() and prints one table (modules
// are discovered at run time, so new ones join without an edit here). A module that fails is
// reported in the table and the run goes on; the exit code is then 1.
//
// Each module runs in a process of its own, one after another, and the next starts only when the
// last one's process group is gone. In one shared process a module measured what the modules
// before it left behind: their heap, their loaded code, processes still stopping. The sessions page
// ran 1.03× its baseline alone and 1.27× after the agent readiness module (ten LOCAL sessions with
// OpenCode) in the same process.
//   npm run bench [-- <module>…]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type BenchResult, type TableRow, formatTable } from './support/harness';

const SELF = fileURLToPath(import.meta.url);
const CHILD_FLAG = '--module';
/** How long a finished module's leftover processes get to exit before they are killed. */
const LEFTOVER_GRACE_MS = 10_000;

type Outcome = { results: BenchResult[] } | { error: string } | { skip: true };

/** In a module's own process: runs it and writes what it measured (or why it failed) to `out`. */
async function runModule(name: string, out: string): Promise<void> {
  let outcome: Outcome;
  try {
    const mod = (await import(pathToFileURL(join(import.meta.dirname, `${name}.ts`)).href)) as {
      run?: () => Promise<BenchResult[]>;
    };
    // A shared helper, not a bench module.
    outcome = typeof mod.run === 'function' ? { results: await mod.run() } : { skip: true };
  } catch (error) {
    outcome = { error: (error as Error).message.split('\n')[0]?.slice(0, 200) ?? String(error) };
  }
  writeFileSync(out, JSON.stringify(outcome));
  // Bench modules may leave handles (pools, timers) open; the outcome file is the whole answer.
  process.exit(0);
}

/** Whether any process of the group `pgid` is still alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs one module in a process group of its own and waits until every process of it is gone. */
async function spawnModule(name: string, dir: string): Promise<{ outcome: Outcome; leftovers: boolean }> {
  const out = join(dir, `${name}.json`);
  const child = spawn(process.execPath, [...process.execArgv, SELF, CHILD_FLAG, name, out], {
    stdio: ['ignore', 'inherit', 'inherit'],
    detached: true,
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode) => resolve(exitCode));
  });
  const pgid = child.pid!;
  const deadline = Date.now() + LEFTOVER_GRACE_MS;
  while (groupAlive(pgid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const leftovers = groupAlive(pgid);
  if (leftovers) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone in between
    }
  }
  let outcome: Outcome;
  try {
    outcome = JSON.parse(readFileSync(out, 'utf8')) as Outcome;
  } catch {
    outcome = { error: `the module's process exited with ${code} before reporting` };
  }
  return { outcome, leftovers };
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const modules = readdirSync(import.meta.dirname, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && e.name !== 'run.ts')
    .map((e) => e.name.slice(0, -'.ts'.length))
    .filter((name) => only.length === 0 || only.includes(name))
    .sort();

  const dir = mkdtempSync(join(tmpdir(), 'sc-bench-'));
  const rows: TableRow[] = [];
  let failed = false;
  try {
    for (const name of modules) {
      const started = Date.now();
      process.stderr.write(`bench ${name}…\n`);
      const { outcome, leftovers } = await spawnModule(name, dir);
      if ('results' in outcome) {
        for (const result of outcome.results) rows.push({ module: name, ...result });
      } else if ('error' in outcome) {
        failed = true;
        rows.push({ module: name, name: 'FAILED', value: Number.NaN, unit: '', note: outcome.error });
      }
      if (leftovers) {
        // A module must stop what it started; its processes would load the next module's numbers.
        failed = true;
        rows.push({
          module: name,
          name: 'FAILED',
          value: Number.NaN,
          unit: '',
          note: `processes of this module were still running ${LEFTOVER_GRACE_MS / 1000} s after it finished (killed)`,
        });
      }
      process.stderr.write(`bench ${name} done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${formatTable(rows)}\n`);
  process.exit(failed ? 1 : 0);
}

if (process.argv[2] === CHILD_FLAG) {
  await runModule(process.argv[3]!, process.argv[4]!);
} else {
  await main();
}
