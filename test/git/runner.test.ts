// The git runner: git processes are started by a small helper process, not by the server (whose
// forks cost in proportion to its memory). Commands keep their outcome, timeout and process-group
// semantics; a helper that dies fails its pending commands and the next command starts a new one.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { type GitRunOptions, runGit } from '../../resolvers/git/exec';
import { waitFor } from '../support/wait';

const dir = mkdtempSync(join(tmpdir(), 'sc-runner-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A git alias running `script` in a shell whose parent is git (`$PPID`). */
function options(script: string, overrides: Partial<GitRunOptions> = {}): GitRunOptions {
  return {
    cwd: dir,
    timeoutMs: 60_000,
    maxOutputBytes: 1 << 20,
    config: { 'alias.x': `!${script}` },
    ...overrides,
  };
}

/** Field `index` (1-based, as in proc(5)) of /proc/<pid>/stat. */
function statField(pid: number, index: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[index - 3]);
}

/** The pid of the process that started git: the parent of the alias shell's parent. */
async function gitParent(): Promise<number> {
  const result = await runGit(['x'], options(`awk '{print $4}' /proc/$PPID/stat`));
  expect(result.exitCode).toBe(0);
  return Number(result.stdout.toString('utf8').trim());
}

describe('git runner', () => {
  test('git is started by a node helper process, not by this process, and keeps its output', async () => {
    const parent = await gitParent();
    expect(parent).not.toBe(process.pid);
    expect(statField(parent, 4)).toBe(process.pid);
    expect(readFileSync(`/proc/${parent}/cmdline`, 'utf8').split('\0')[0]).toBe(process.execPath);
    // The same helper serves the next command.
    expect(await gitParent()).toBe(parent);

    const version = await runGit(['--version'], options('true'));
    expect(version).toMatchObject({ exitCode: 0, timedOut: false, outputTooLarge: false, stderr: '' });
    expect(version.stdout.toString('utf8')).toMatch(/^git version \d/);
    const failing = await runGit(['x'], options('echo oops >&2; exit 3'));
    expect(failing).toMatchObject({ exitCode: 3, stderr: 'oops\n' });
    const fed = await runGit(['x'], { ...options('cat'), stdin: Buffer.from('to stdin') });
    expect(fed.stdout.toString('utf8')).toBe('to stdin');
  });

  test('a timeout kills the whole process group of the command', async () => {
    const pidFile = join(dir, 'sleeper.pid');
    const result = await runGit(['x'], options(`echo $$ > ${pidFile}; sleep 60`, { timeoutMs: 300 }));
    expect(result.timedOut).toBe(true);
    const sleeper = Number(readFileSync(pidFile, 'utf8'));
    await waitFor(() => !existsSync(`/proc/${sleeper}`) || statState(sleeper) === 'Z', 10_000);
  });

  test('a helper that dies fails its pending command; the next command starts a new helper', async () => {
    const before = await gitParent();
    expect(before).not.toBe(process.pid);
    const pidFile = join(dir, 'pending.pid');
    const pending = runGit(['x'], options(`echo $$ > ${pidFile}; exec sleep 60`));
    const shell = await waitFor(
      () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : null),
      10_000,
    );
    process.kill(before, 'SIGKILL');
    await expect(pending).rejects.toThrow(/git runner exited/);
    // The orphaned command is in its own process group: end it.
    process.kill(-statField(shell, 5), 'SIGKILL');

    const after = await gitParent();
    expect(after).not.toBe(before);
    expect(statField(after, 4)).toBe(process.pid);
  });
});

function statState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}
