// What marks a process or a file as belonging to one test run. Global setup picks a run id, makes
// a directory for the run and points TMPDIR at it, so every temporary directory the tests create
// (data dirs, LOCAL sandboxes, repositories) lives below it; processes the tests spawn with an
// explicit environment copy the run id in (`testRunEnv()`). Global teardown then finds every
// process the run left behind by its environment or its working directory.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Environment variable carrying the run id into every process of the run. */
export const TEST_RUN_VARIABLE = 'SINGULACOMP_TEST_RUN';
/** Environment variable naming the migrated template database of the run. */
export const TEMPLATE_DATABASE_VARIABLE = 'SINGULACOMP_TEST_TEMPLATE_DB';

/**
 * Runtime settings global setup gives the run's workers and every process they spawn. Only for the
 * suite's own `opencode serve` processes (Bun reads `BUN_JSC_*`): JavaScriptCore without its
 * optimizing tiers (DFG, and FTL above it). A test's OpenCode lives for seconds and mostly runs code
 * once; compiling it for speed cost about a tenth of its CPU (the agent reload, supervisor and lease
 * tests: 49.5 s of CPU with the tiers, 44 s without). Benches do not set it: they measure OpenCode
 * as a sandbox runs it.
 */
export const TEST_RUN_SETTINGS: Readonly<Record<string, string>> = { BUN_JSC_useDFGJIT: '0' };

/**
 * `{ SINGULACOMP_TEST_RUN: <id>, ...TEST_RUN_SETTINGS }` inside a run, else `{}`: spread it into a
 * spawned process's env.
 */
export function testRunEnv(): Record<string, string> {
  const id = process.env[TEST_RUN_VARIABLE];
  return id ? { [TEST_RUN_VARIABLE]: id, ...TEST_RUN_SETTINGS } : {};
}

export interface RunProcess {
  pid: number;
  command: string;
  cwd: string;
}

/** The ancestors of this process (vitest's own parents carry the run id and are not leftovers). */
function ancestors(): Set<number> {
  const pids = new Set<number>([process.pid]);
  let pid = process.ppid;
  while (pid > 1 && !pids.has(pid)) {
    pids.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Field 4 (ppid) follows the parenthesised command name, which may itself contain spaces.
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break;
    }
  }
  return pids;
}

/**
 * Live processes (zombies excluded) whose environment carries `runId` or whose working directory
 * is below `runDir`, except this process and its ancestors.
 */
export function runProcesses(runId: string, runDir: string): RunProcess[] {
  const needle = Buffer.from(`${TEST_RUN_VARIABLE}=${runId}\0`);
  const skip = ancestors();
  const found: RunProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || skip.has(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const environ = readFileSync(`/proc/${pid}/environ`);
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // not ours to read, or gone
      }
      const marked =
        environ.indexOf(needle) === 0 || environ.includes(Buffer.concat([Buffer.from([0]), needle]));
      if (!marked && !cwd.startsWith(`${runDir}/`) && cwd !== runDir) continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      found.push({ pid, command, cwd });
    } catch {
      // gone while we looked
    }
  }
  return found;
}
