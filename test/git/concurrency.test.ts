import { spawn } from 'node:child_process';
import { existsSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect } from 'vitest';
import { createGitService, GitBranchExistsError } from '../../resolvers/git/git';
import { git, makeUpstream, test } from './helpers';

const CHILD_SCRIPT = fileURLToPath(new URL('./cut-branches.child.ts', import.meta.url));

interface Outcome {
  ok: boolean;
  commit?: string;
  error?: string;
}

/** Starts the child process and resolves once it is ready; `go()` starts it and returns its outcomes. */
async function startChild(args: string[]): Promise<{ go: () => Promise<Outcome[]> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD_SCRIPT, ...args], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.startsWith('ready\n')) resolve();
    });
    exited.then((code) => reject(new Error(`child exited (${code}) before ready: ${stderr}`)));
  });
  return {
    go: async () => {
      child.stdin.end('go\n');
      const code = await exited;
      if (code !== 0) throw new Error(`child exited with ${code}: ${stderr}`);
      return JSON.parse(stdout.slice('ready\n'.length)) as Outcome[];
    },
  };
}

function headsAt(repoDir: string): Map<string, string> {
  const out = git(repoDir, 'for-each-ref', '--format=%(refname:short) %(objectname)', 'refs/heads');
  return new Map(out.split('\n').map((line) => line.split(' ') as [string, string]));
}

describe.each(['worktree', 'bare'] as const)('concurrent branch cutting against a %s upstream', (kind) => {
  test('40 parallel cuts in this process and 40 in a second process sharing the cache all land at the base commit', async ({
    tmp,
  }) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), kind);
    const cacheDir = join(tmp, 'cache');
    // Cold cache: both processes race to create the mirror and fetch the base.
    const child = await startChild([upstream.url, cacheDir, 'main', 'child', '40']);
    const service = createGitService({ cacheDir, timeoutMs: 30_000 });
    const childOutcomes = child.go();
    const parentOutcomes = await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        service.cutBranch({ url: upstream.url }, 'main', `parent-${index}`).then(
          ({ commit }): Outcome => ({ ok: true, commit }),
          (error: Error): Outcome => ({ ok: false, error: `${error.name}: ${error.message}` }),
        ),
      ),
    );
    const outcomes = [...parentOutcomes, ...(await childOutcomes)];
    expect(outcomes.filter((outcome) => !outcome.ok)).toEqual([]);
    expect(new Set(outcomes.map((outcome) => outcome.commit))).toEqual(new Set([upstream.second]));

    const heads = headsAt(upstream.dir);
    for (let index = 0; index < 40; index += 1) {
      expect(heads.get(`parent-${index}`)).toBe(upstream.second);
      expect(heads.get(`child-${index}`)).toBe(upstream.second);
    }
    expect(heads.get('main')).toBe(upstream.second);
    expect(heads.get('feature')).toBe(upstream.feature);
    expect(heads.size).toBe(82);

    const mirror = await service.mirrorDir({ url: upstream.url });
    git(mirror, 'fsck', '--no-progress');
    expect(readdirSync(join(cacheDir, 'mirrors'))).toEqual([mirror.split('/').at(-1)]);
    expect(readdirSync(join(cacheDir, 'locks'))).toEqual([]);
  });
});

describe('branch creation races', () => {
  test('ten parallel cuts of the same branch name create it once and report the rest as existing', async ({
    tmp,
  }) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), 'bare');
    const service = createGitService({ cacheDir: join(tmp, 'cache') });
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, index) =>
        service.cutBranch({ url: upstream.url }, index % 2 === 0 ? 'main' : 'v1', 'contested'),
      ),
    );
    const created = results.filter((result) => result.status === 'fulfilled');
    const rejected = results.filter((result) => result.status === 'rejected');
    expect(created).toHaveLength(1);
    expect(rejected.map((result) => (result as PromiseRejectedResult).reason)).toEqual(
      Array.from({ length: 9 }, () => expect.any(GitBranchExistsError)),
    );
    const winner = (created[0] as PromiseFulfilledResult<{ commit: string }>).value.commit;
    expect(headsAt(upstream.dir).get('contested')).toBe(winner);
  });

  test('a lock file left by a dead process on this host is broken instead of waited on', async ({ tmp }) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), 'bare');
    const cacheDir = join(tmp, 'cache');
    const service = createGitService({ cacheDir, timeoutMs: 30_000 });
    // Learn the lock path from the mirror name, then remove the mirror to force a locked fetch.
    const mirror = await service.mirrorDir({ url: upstream.url });
    const lockPath = join(
      cacheDir,
      'locks',
      mirror
        .split('/')
        .at(-1)
        ?.replace(/\.git$/, '.lock') ?? '',
    );
    const dead = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => dead.on('close', resolve));
    await mkdir(join(cacheDir, 'locks'), { recursive: true });
    writeFileSync(lockPath, JSON.stringify({ pid: dead.pid, host: hostname(), token: 'abandoned' }));

    const started = Date.now();
    expect((await service.cutBranch({ url: upstream.url }, 'main', 'after-crash')).commit).toBe(
      upstream.second,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(existsSync(lockPath)).toBe(false);
  });

  test('an unreadable lock file older than the stale limit is broken', async ({ tmp }) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), 'bare');
    const cacheDir = join(tmp, 'cache');
    const service = createGitService({ cacheDir, timeoutMs: 1_000 });
    const mirror = await service.mirrorDir({ url: upstream.url });
    const lockPath = join(
      cacheDir,
      'locks',
      mirror
        .split('/')
        .at(-1)
        ?.replace(/\.git$/, '.lock') ?? '',
    );
    await mkdir(join(cacheDir, 'locks'), { recursive: true });
    writeFileSync(lockPath, '');
    const longAgo = new Date(Date.now() - 60 * 60_000);
    utimesSync(lockPath, longAgo, longAgo);

    expect((await service.cutBranch({ url: upstream.url }, 'main', 'after-stale')).commit).toBe(
      upstream.second,
    );
    expect(existsSync(lockPath)).toBe(false);
  });
});
