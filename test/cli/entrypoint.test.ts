// singulacomp-entrypoint as PID 1 (a fresh PID namespace via unshare): it reaps orphans, forwards
// signals to the daemon and exits with the daemon's status.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { waitFor } from '../support/wait';

const ENTRYPOINT = new URL('../../cli/entrypoint.sh', import.meta.url).pathname;

function run(command: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    execFile(command[0]!, command.slice(1), { timeout: 60_000 }, (error, stdout) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout });
    });
  });
}

// An orphan (the backgrounded sleep of an exited subshell) is re-parented to PID 1; once it ends,
// only PID 1 can reap it. The listing runs after it ended.
const ORPHAN_THEN_LIST = ['sh', '-c', '(sleep 0.2 &); sleep 1.5; ps -A -o stat=,comm='];

describe('singulacomp-entrypoint', () => {
  test('as PID 1 it reaps orphaned processes', async () => {
    const result = await run(['unshare', '--pid', '--fork', '--mount-proc', ENTRYPOINT, ...ORPHAN_THEN_LIST]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(/^Z/m);
  });

  test('a PID 1 that does not reap leaves the same orphan a zombie (the check above can fail)', async () => {
    const [cmd, ...args] = ORPHAN_THEN_LIST;
    const notReaping = `require('child_process').spawn(${JSON.stringify(cmd)}, ${JSON.stringify(args)}, { stdio: 'inherit' }).on('exit', (c) => process.exit(c))`;
    const result = await run([
      'unshare',
      '--pid',
      '--fork',
      '--mount-proc',
      process.execPath,
      '-e',
      notReaping,
    ]);
    expect(result.stdout).toMatch(/^Z/m);
  });

  test('forwards SIGTERM to the daemon and exits with the daemon’s status', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sc-entry-'));
    const marker = join(dir, 'got-signal');
    const daemon = `process.on('SIGTERM', () => { require('fs').writeFileSync(${JSON.stringify(marker)}, 'TERM'); process.exit(7); }); require('fs').writeFileSync(${JSON.stringify(join(dir, 'ready'))}, ''); setInterval(() => {}, 1000);`;
    const entry = spawn(ENTRYPOINT, [process.execPath, '-e', daemon], { stdio: 'ignore' });
    const exited = new Promise<number | null>((resolve) => entry.once('exit', (code) => resolve(code)));
    await waitFor(async () => {
      try {
        readFileSync(join(dir, 'ready'));
        return true;
      } catch {
        return false;
      }
    });
    entry.kill('SIGTERM');
    expect(await exited).toBe(7);
    expect(readFileSync(marker, 'utf8')).toBe('TERM');
  });

  test('exits with the daemon’s own exit status when it ends by itself', async () => {
    const result = await run([ENTRYPOINT, 'sh', '-c', 'exit 3']);
    expect(result.code).toBe(3);
  });
});
