// Runs once per test run, in vitest's main process (vitest 4 global setup).
// - The generated clients must exist (npm install runs `generate`), and the daemon bundle LOCAL
//   sandboxes run is rebuilt from the current agent/ sources; the server bundle server processes
//   run when a source changed since it was built; the dashboard (dist/web) when web/ changed since.
// - Migrates one template database; createTestDatabase() clones it (CREATE DATABASE … TEMPLATE …),
//   so test files no longer each run every migration.
// - Marks the run (run id, TMPDIR below a run directory, on /dev/shm where it can be, see
//   scratchRoot() and support/test-run.ts) and, at the end,
//   fails the run if any process it started is still alive: a leaked sandbox or `opencode serve`
//   would otherwise keep running for hours after its clone is gone.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTemplateDatabase, dropDatabase } from './support/database';
import {
  TEMPLATE_DATABASE_VARIABLE,
  TEST_RUN_SETTINGS,
  TEST_RUN_VARIABLE,
  runProcesses,
} from './support/test-run';

/** Rebuilds dist/server.mjs when it is missing or older than a file it was built from. */
const BUILD_SERVER_IF_STALE = `
import { SERVER, buildBundle, staleReason } from './scripts/bundles.mjs';
if (staleReason(SERVER)) await buildBundle(SERVER);
`;

/** How long teardown lets the run's processes finish exiting before it calls them leaked. */
const LEAK_GRACE_MS = 10_000;

/** Free space a memory file system must have to take a run's scratch files (a full run peaked at 135 MB). */
const MEMORY_SCRATCH_MIN_FREE_BYTES = 1024 ** 3;

/**
 * Where the run's directory goes. The tests write many small, short-lived files (git objects and
 * lock files, OpenCode's and PGlite's data, sandbox workspaces), and on a disk file system creating
 * and deleting them is kernel work: the ext4 inode allocator showed up under git in a profile of the
 * suite. On /dev/shm (tmpfs) the same tests took 46-48 s of system CPU instead of 54-73 s and
 * finished 4-5 % sooner. Used only when the caller did not choose TMPDIR, and when /dev/shm is a
 * tmpfs that allows executables (test repositories run hooks) and has room; else the usual tmpdir().
 */
function scratchRoot(): string {
  if (process.env.TMPDIR) return tmpdir();
  try {
    const shm = readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .find((fields) => fields[1] === '/dev/shm');
    if (shm?.[2] !== 'tmpfs' || shm[3]?.split(',').includes('noexec')) return tmpdir();
    const { bavail, bsize } = statfsSync('/dev/shm');
    if (bavail * bsize < MEMORY_SCRATCH_MIN_FREE_BYTES) return tmpdir();
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

/** dist/web is rebuilt when a file under web/ is newer than it (the browser tests load it). */
function buildDashboardIfStale(): void {
  const root = new URL('..', import.meta.url).pathname;
  const built = join(root, 'dist/web/index.html');
  const builtAt = existsSync(built) ? statSync(built).mtimeMs : 0;
  const newest = (dir: string): number =>
    Math.max(
      0,
      ...readdirSync(dir, { withFileTypes: true }).map((e) =>
        e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs,
      ),
    );
  if (newest(join(root, 'web')) <= builtAt) return;
  const build = spawnSync('npx', ['--no-install', 'vite', 'build', '--config', 'web/vite.config.ts'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (build.status !== 0) throw new Error('Building the dashboard (dist/web) failed.');
}

export default async function setup(): Promise<() => Promise<void>> {
  if (!existsSync(new URL('../prisma/generated/client/client.ts', import.meta.url))) {
    throw new Error('Prisma client not generated: run `npm run generate` (npm install does it).');
  }
  const bundle = spawnSync(process.execPath, ['scripts/build-agent.mjs'], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: 'inherit',
  });
  if (bundle.status !== 0) throw new Error('Building dist/singulacomp-agent.mjs failed.');
  // The CLI bundle too, once, rather than by the first of many concurrent CLI runs.
  const cli = spawnSync(process.execPath, ['scripts/build-cli.mjs'], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: 'inherit',
  });
  if (cli.status !== 0) throw new Error('Building dist/singulacomp.mjs failed.');
  // The server bundle that server processes run (support/server-process.ts), when a source changed
  // since it was built: the tests run what `npm start` runs.
  const server = spawnSync(process.execPath, ['--input-type=module', '-e', BUILD_SERVER_IF_STALE], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: 'inherit',
  });
  if (server.status !== 0) throw new Error('Building dist/server.mjs failed.');
  buildDashboardIfStale();
  const runId = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const previousTmpdir = process.env.TMPDIR;
  const runDir = join(scratchRoot(), `sc-test-run-${runId}`);
  mkdirSync(runDir, { recursive: true });
  // Workers are forked after global setup and inherit these.
  process.env[TEST_RUN_VARIABLE] = runId;
  Object.assign(process.env, TEST_RUN_SETTINGS);
  process.env.TMPDIR = runDir;
  const template = await createTemplateDatabase(`sc_tpl_${runId.replace(/-/g, '_')}`);
  process.env[TEMPLATE_DATABASE_VARIABLE] = template;

  return async () => {
    delete process.env[TEMPLATE_DATABASE_VARIABLE];
    await dropDatabase(template);
    const deadline = Date.now() + LEAK_GRACE_MS;
    let left = runProcesses(runId, runDir);
    while (left.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = runProcesses(runId, runDir);
    }
    for (const leaked of left) {
      try {
        process.kill(leaked.pid, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
    }
    if (previousTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previousTmpdir;
    rmSync(runDir, { recursive: true, force: true });
    if (left.length > 0) {
      // vitest reports an error thrown here but still exits 0: make the run fail.
      process.exitCode = 1;
      throw new Error(
        `the test run left ${left.length} process(es) running (now killed); whichever test started them ` +
          `must stop them:\n${left.map((p) => `  pid ${p.pid} in ${p.cwd}: ${p.command}`).join('\n')}`,
      );
    }
  };
}
