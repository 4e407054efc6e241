import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import {
  createGitService,
  GitBranchExistsError,
  GitCommandError,
  GitInvalidPathError,
  GitInvalidRefNameError,
  GitRefNotFoundError,
  GitRepositoryUnreachableError,
} from '../../resolvers/git/git';
import { createTestClock } from '../support/clock';
import { deferred, eventLoopTurns } from '../support/wait';
import { git, makeUpstream, refValue, test } from './helpers';

describe.each(['worktree', 'bare'] as const)('git service against a %s upstream', (kind) => {
  const setup = (tmp: string) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), kind);
    const service = createGitService({ cacheDir: join(tmp, 'cache'), timeoutMs: 20_000 });
    return { upstream, service, repo: { url: upstream.url } };
  };

  test('resolveRef returns the tip commit of a branch', async ({ tmp }) => {
    const { upstream, service, repo } = setup(tmp);
    expect(await service.resolveRef(repo, 'main')).toBe(upstream.second);
    expect(await service.resolveRef(repo, 'feature')).toBe(upstream.feature);
    expect(await service.resolveRef(repo, 'refs/heads/feature')).toBe(upstream.feature);
    expect(await service.resolveRef(repo, 'HEAD')).toBe(upstream.second);
  });

  test('resolveRef peels an annotated tag to its commit and resolves a lightweight tag', async ({ tmp }) => {
    const { upstream, service, repo } = setup(tmp);
    expect(await service.resolveRef(repo, 'v1')).toBe(upstream.first);
    expect(await service.resolveRef(repo, 'refs/tags/v1')).toBe(upstream.first);
    expect(await service.resolveRef(repo, 'light')).toBe(upstream.second);
  });

  test('resolveRef accepts a full sha that exists upstream, even one that is not a ref tip', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    expect(await service.resolveRef(repo, upstream.first)).toBe(upstream.first);
    expect(await service.resolveRef(repo, upstream.second)).toBe(upstream.second);
  });

  test('resolveRef returns null for a missing branch and for an unknown sha', async ({ tmp }) => {
    const { service, repo } = setup(tmp);
    expect(await service.resolveRef(repo, 'does-not-exist')).toBeNull();
    expect(await service.resolveRef(repo, 'refs/heads/nope/deeper')).toBeNull();
    expect(await service.resolveRef(repo, 'a'.repeat(40))).toBeNull();
  });

  test('resolveRef takes a found ref from a lookup within maxAgeMs; a later one, a push of its own or no maxAgeMs asks again', async ({
    tmp,
  }) => {
    const { upstream, repo } = setup(tmp);
    const clock = createTestClock();
    clock.freeze();
    const service = createGitService({ cacheDir: join(tmp, 'cache'), timeoutMs: 20_000, now: clock.now });
    const recent = { maxAgeMs: 1_000 };
    expect(await service.resolveRef(repo, 'main', recent)).toBe(upstream.second);

    // main moves upstream behind the service's back.
    git(upstream.dir, 'update-ref', 'refs/heads/main', upstream.feature);
    clock.advance(1_000);
    expect(await service.resolveRef(repo, 'main', recent)).toBe(upstream.second);
    expect(await service.resolveRef(repo, 'refs/heads/main', recent)).toBe(upstream.feature);
    expect(await service.resolveRef(repo, 'main')).toBe(upstream.feature);
    clock.advance(1);
    expect(await service.resolveRef(repo, 'main', recent)).toBe(upstream.feature);

    // A missing ref is never remembered: once it exists it is found.
    expect(await service.resolveRef(repo, 'late', recent)).toBeNull();
    git(upstream.dir, 'update-ref', 'refs/heads/late', upstream.first);
    expect(await service.resolveRef(repo, 'late', recent)).toBe(upstream.first);

    // A push through the service forgets what it remembered of that upstream.
    expect(await service.resolveRef(repo, 'feature', recent)).toBe(upstream.feature);
    git(upstream.dir, 'update-ref', 'refs/heads/main', upstream.second);
    await service.fetchRef(repo, 'refs/heads/late');
    const [pushed] = await service.pushToUpstream(repo, [
      { ref: 'refs/heads/feature', oldSha: upstream.feature, newSha: upstream.first },
    ]);
    expect(pushed).toEqual({ ref: 'refs/heads/feature', ok: true, reason: null });
    expect(await service.resolveRef(repo, 'feature', recent)).toBe(upstream.first);
    expect(await service.resolveRef(repo, 'main', recent)).toBe(upstream.second);
  });

  test('defaultBranch names the branch the upstream HEAD points to', async ({ tmp }) => {
    const { service, repo } = setup(tmp);
    expect(await service.defaultBranch(repo)).toBe('main');
  });

  test('cutBranch creates the branch upstream at the base commit and leaves main untouched', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    const branch = '6f1c2a4e-8d7b-4c3a-9e21-0b5d7f3a1c90';
    const result = await service.cutBranch(repo, 'main', branch);
    expect(result.commit).toBe(upstream.second);
    expect(refValue(upstream.dir, `refs/heads/${branch}`)).toBe(upstream.second);
    expect(refValue(upstream.dir, 'refs/heads/main')).toBe(upstream.second);
    // The mirror records the branch it created, so the workspace clone need not fetch it back.
    expect(refValue(await service.mirrorDir(repo), `refs/heads/${branch}`)).toBe(upstream.second);
    expect(await service.branchExists(repo, branch)).toBe(true);
    expect(await service.branchExists(repo, 'never-cut')).toBe(false);
  });

  test('cutBranch from a tag, another branch and a full sha points the branch at that commit', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    expect((await service.cutBranch(repo, 'v1', 'from-tag')).commit).toBe(upstream.first);
    expect((await service.cutBranch(repo, 'feature', 'from-feature')).commit).toBe(upstream.feature);
    expect((await service.cutBranch(repo, upstream.first, 'from-sha')).commit).toBe(upstream.first);
    expect((await service.cutBranch(repo, 'HEAD', 'from-head')).commit).toBe(upstream.second);
    expect(refValue(upstream.dir, 'refs/heads/from-tag')).toBe(upstream.first);
    expect(refValue(upstream.dir, 'refs/heads/from-feature')).toBe(upstream.feature);
    expect(refValue(upstream.dir, 'refs/heads/from-sha')).toBe(upstream.first);
    expect(refValue(upstream.dir, 'refs/heads/from-head')).toBe(upstream.second);
  });

  test('a cut from a commit after its mirror was removed from the cache rebuilds the mirror and lands', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    expect((await service.cutBranch(repo, upstream.first, 'before-wipe')).commit).toBe(upstream.first);
    // The service knows the mirror holds that commit; the mirror goes, and that knowledge with it.
    await rm(await service.mirrorDir(repo), { recursive: true, force: true });
    expect((await service.cutBranch(repo, upstream.first, 'after-wipe')).commit).toBe(upstream.first);
    expect(refValue(upstream.dir, 'refs/heads/after-wipe')).toBe(upstream.first);
  });

  test('a cut announced with expectCut joins the push of a cut that was already waiting to start', async ({
    tmp,
  }) => {
    const { upstream, repo } = setup(tmp);
    // No bound but the ticket itself: the test waits for the second cut, never for a clock.
    const service = createGitService({
      cacheDir: join(tmp, 'cache'),
      timeoutMs: 20_000,
      pushLingerMs: 60_000,
    });
    // The upstream's post-receive hook runs once per push and lists the refs it updated.
    const pushes = join(tmp, 'pushes.log');
    const hooks = join(kind === 'bare' ? upstream.dir : join(upstream.dir, '.git'), 'hooks');
    writeFileSync(join(hooks, 'post-receive'), `#!/bin/sh\n{ echo push; cat; } >> '${pushes}'\n`, {
      mode: 0o755,
    });
    const firstTicket = service.expectCut(repo);
    const secondTicket = service.expectCut(repo);
    const queued = deferred();
    const first = service.cutBranch(repo, upstream.first, 'announced-a', () => {
      firstTicket();
      queued.resolve();
    });
    await queued.promise;
    // Long enough for a push that does not wait to have started (its git process is spawned).
    await eventLoopTurns();
    const second = service.cutBranch(repo, upstream.first, 'announced-b', secondTicket);
    expect(await Promise.all([first, second])).toEqual([
      { commit: upstream.first },
      { commit: upstream.first },
    ]);
    const log = readFileSync(pushes, 'utf8').trim().split('\n');
    expect(log[0]).toBe('push');
    expect(log.filter((line) => line === 'push')).toHaveLength(1);
    expect(
      log
        .slice(1)
        .map((line) => line.split(' ')[2])
        .sort(),
    ).toEqual(['refs/heads/announced-a', 'refs/heads/announced-b']);
    expect(refValue(upstream.dir, 'refs/heads/announced-b')).toBe(upstream.first);
  });

  test('a cut answers while the mirror is locked; mirrorDir waits until the branch is recorded there', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    // The first cut brings the base commit into the mirror, so the next needs no locked fetch.
    await service.cutBranch(repo, upstream.first, 'brings-the-commit');
    const gate = deferred();
    const inLock = deferred();
    const holder = service.withMirrorLock(repo, async () => {
      inLock.resolve();
      await gate.promise;
    });
    await inLock.promise;
    expect(await service.cutBranch(repo, upstream.first, 'cut-while-locked')).toEqual({
      commit: upstream.first,
    });
    expect(refValue(upstream.dir, 'refs/heads/cut-while-locked')).toBe(upstream.first);
    let dir: string | null = null;
    const mirror = service.mirrorDir(repo).then((d) => {
      dir = d;
      return d;
    });
    await eventLoopTurns();
    expect(dir).toBeNull();
    gate.resolve();
    await holder;
    expect(refValue(await mirror, 'refs/heads/cut-while-locked')).toBe(upstream.first);
  });

  test('a second cut with the same name fails with GitBranchExistsError and does not move the branch', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    await service.cutBranch(repo, 'v1', 'session-1');
    await expect(service.cutBranch(repo, 'main', 'session-1')).rejects.toBeInstanceOf(GitBranchExistsError);
    await expect(service.cutBranch(repo, 'v1', 'session-1')).rejects.toBeInstanceOf(GitBranchExistsError);
    // Also an existing branch that is an ancestor of the base (a plain push would fast-forward it).
    await expect(service.cutBranch(repo, 'main', 'feature')).rejects.toBeInstanceOf(GitBranchExistsError);
    expect(refValue(upstream.dir, 'refs/heads/session-1')).toBe(upstream.first);
    expect(refValue(upstream.dir, 'refs/heads/feature')).toBe(upstream.feature);
    expect(refValue(upstream.dir, 'refs/heads/main')).toBe(upstream.second);
  });

  test('cutBranch from a missing base fails with GitRefNotFoundError and creates nothing', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    await expect(service.cutBranch(repo, 'no-such-base', 'orphan')).rejects.toBeInstanceOf(
      GitRefNotFoundError,
    );
    await expect(service.cutBranch(repo, 'b'.repeat(40), 'orphan')).rejects.toBeInstanceOf(
      GitRefNotFoundError,
    );
    expect(refValue(upstream.dir, 'refs/heads/orphan')).toBeNull();
  });

  test('cutBranch picks up a base branch that moved since the mirror last fetched it', async ({ tmp }) => {
    const { upstream, service, repo } = setup(tmp);
    await service.cutBranch(repo, 'main', 'before-move');
    const work = kind === 'worktree' ? upstream.dir : join(tmp, 'upstream', 'work');
    writeFileSync(join(work, 'README.md'), 'third\n');
    git(work, 'commit', '--quiet', '-am', 'third');
    if (kind === 'bare') git(work, 'push', '--quiet', upstream.dir, 'main');
    const third = git(work, 'rev-parse', 'HEAD');
    expect((await service.cutBranch(repo, 'main', 'after-move')).commit).toBe(third);
    expect(refValue(upstream.dir, 'refs/heads/after-move')).toBe(third);
  });

  test('readFileAtRef returns file bytes at a ref and null for a missing file, directory or ref', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    expect((await service.readFileAtRef(repo, 'main', 'README.md'))?.toString()).toBe('second\n');
    expect((await service.readFileAtRef(repo, 'v1', 'README.md'))?.toString()).toBe('first\n');
    expect((await service.readFileAtRef(repo, upstream.second, './dir/nested.json'))?.toString()).toBe(
      '{"nested":true}\n',
    );
    expect(await service.readFileAtRef(repo, 'v1', 'dir/nested.json')).toBeNull();
    expect(await service.readFileAtRef(repo, 'main', 'dir')).toBeNull();
    expect(await service.readFileAtRef(repo, 'gone', 'README.md')).toBeNull();
    await expect(service.readFileAtRef(repo, 'main', '../etc/passwd')).rejects.toBeInstanceOf(
      GitInvalidPathError,
    );
  });

  test('readFileAtRef refuses a file larger than maxFileBytes', async ({ tmp }) => {
    const { upstream } = setup(tmp);
    const small = createGitService({ cacheDir: join(tmp, 'small-cache'), maxFileBytes: 4 });
    const error = await small.readFileAtRef({ url: upstream.url }, 'main', 'README.md').catch((e) => e);
    expect(error).toBeInstanceOf(GitCommandError);
    expect(error.message).toMatch(/README.md is larger than maxFileBytes \(4 bytes\)/);
    expect(
      (await small.readFileAtRef({ url: upstream.url }, 'main', 'dir/nested.json').catch((e) => e)).name,
    ).toBe('GitCommandError');
  });

  test('fetchRef puts the commit into the mirror so other code can read it there', async ({ tmp }) => {
    const { upstream, service, repo } = setup(tmp);
    const at = await service.fetchRef(repo, 'feature');
    expect(at).toEqual({ commit: upstream.feature, mirrorDir: await service.mirrorDir(repo) });
    expect(git(at?.mirrorDir ?? '', 'show', `${upstream.feature}:feature.txt`)).toBe('feature');
    expect(await service.fetchRef(repo, 'missing')).toBeNull();
  });

  test('cloneWorkspace checks out the session branch at its commit with the upstream as origin', async ({
    tmp,
  }) => {
    const { upstream, service, repo } = setup(tmp);
    await service.cutBranch(repo, 'v1', 'session-clone');
    const target = join(tmp, 'workspace');
    const helperKey = 'credential.http://127.0.0.1:4000.helper';
    // A key with '=' cannot ride on the clone's --config (git splits at the first '=').
    const queryKey = 'credential.http://127.0.0.1:4000/a?b=c.username';
    const { commit } = await service.cloneWorkspace(repo, 'session-clone', target, {
      config: { [helperKey]: '!singulacomp git-credential', [queryKey]: 'x-token' },
    });
    expect(git(target, 'config', '--local', '--get', helperKey)).toBe('!singulacomp git-credential');
    expect(git(target, 'config', '--local', '--get', queryKey)).toBe('x-token');
    expect(commit).toBe(upstream.first);
    expect(git(target, 'rev-parse', 'HEAD')).toBe(upstream.first);
    expect(git(target, 'symbolic-ref', '--short', 'HEAD')).toBe('session-clone');
    expect(git(target, 'remote', 'get-url', 'origin')).toBe(upstream.url);
    expect(git(target, 'status', '--porcelain')).toBe('');
    expect(existsSync(join(target, '.git', 'objects', 'info', 'alternates'))).toBe(false);
    // The clone is a real one: it can push its work back to the session branch.
    writeFileSync(join(target, 'agent.txt'), 'work\n');
    git(target, 'add', 'agent.txt');
    git(target, 'commit', '--quiet', '-m', 'agent work');
    git(target, 'push', '--quiet', 'origin', 'HEAD');
    expect(refValue(upstream.dir, 'refs/heads/session-clone')).toBe(git(target, 'rev-parse', 'HEAD'));
  });

  test('cloneWorkspace of a branch that does not exist fails with GitRefNotFoundError', async ({ tmp }) => {
    const { service, repo } = setup(tmp);
    await expect(service.cloneWorkspace(repo, 'missing', join(tmp, 'ws'))).rejects.toBeInstanceOf(
      GitRefNotFoundError,
    );
    expect(existsSync(join(tmp, 'ws'))).toBe(false);
  });
});

describe('input validation', () => {
  test('invalid ref and branch names are rejected before any git command runs', async ({ tmp }) => {
    const cacheDir = join(tmp, 'cache');
    const service = createGitService({ cacheDir });
    // An upstream that would fail with GitRepositoryUnreachableError if it were ever contacted.
    const repo = { url: join(tmp, 'no-such-repository') };
    const badNames = [
      '--upload-pack=touch /tmp/pwned',
      '-f',
      'a..b',
      'a b',
      'tab\tname',
      'new\nline',
      'ctrl\u0007',
      'a~1',
      'a^',
      'a:b',
      'a?',
      'a*',
      'a[',
      'a\\b',
      'a@{1}',
      '@',
      '/lead',
      'trail/',
      'a//b',
      '.hidden',
      'a/.hidden',
      'x.lock',
      'a/x.lock/b',
      'dot.',
      '',
    ];
    for (const name of badNames) {
      await expect(service.resolveRef(repo, name), name).rejects.toBeInstanceOf(GitInvalidRefNameError);
      await expect(service.cutBranch(repo, 'main', name), name).rejects.toBeInstanceOf(
        GitInvalidRefNameError,
      );
      await expect(service.cutBranch(repo, name, 'ok'), name).rejects.toBeInstanceOf(GitInvalidRefNameError);
      await expect(service.branchExists(repo, name), name).rejects.toBeInstanceOf(GitInvalidRefNameError);
      await expect(service.cloneWorkspace(repo, name, join(tmp, 'ws')), name).rejects.toBeInstanceOf(
        GitInvalidRefNameError,
      );
    }
    await expect(service.cutBranch(repo, 'main', 'HEAD')).rejects.toBeInstanceOf(GitInvalidRefNameError);
    await expect(service.cutBranch(repo, 'main', 'refs/heads/x')).rejects.toBeInstanceOf(
      GitInvalidRefNameError,
    );
    // Nothing ran: not even the mirror was created.
    expect(existsSync(cacheDir)).toBe(false);
  });

  test('an unreachable local path fails with GitRepositoryUnreachableError', async ({ tmp }) => {
    const service = createGitService({ cacheDir: join(tmp, 'cache') });
    const error = await service.resolveRef({ url: join(tmp, 'no-such-repository') }, 'main').catch((e) => e);
    expect(error).toBeInstanceOf(GitRepositoryUnreachableError);
    expect(error.message).toMatch(/repository not found/);
  });

  test('an empty upstream has no default branch and no refs to cut from', async ({ tmp }) => {
    git(tmp, 'init', '--quiet', '--bare', 'empty.git');
    const service = createGitService({ cacheDir: join(tmp, 'cache') });
    const repo = { url: join(tmp, 'empty.git') };
    expect(await service.defaultBranch(repo)).toBeNull();
    expect(await service.resolveRef(repo, 'HEAD')).toBeNull();
    await expect(service.cutBranch(repo, 'HEAD', 'x')).rejects.toBeInstanceOf(GitRefNotFoundError);
  });

  test('the mirror cache holds one bare repository per upstream', async ({ tmp }) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), 'bare');
    const service = createGitService({ cacheDir: join(tmp, 'cache') });
    await service.cutBranch({ url: upstream.url }, 'main', 'one');
    await service.cutBranch({ url: upstream.url }, 'main', 'two');
    expect(readdirSync(join(tmp, 'cache', 'mirrors'))).toHaveLength(1);
    const mirror = await service.mirrorDir({ url: upstream.url });
    expect(git(mirror, 'rev-parse', '--is-bare-repository')).toBe('true');
    expect(git(mirror, 'config', 'gc.auto')).toBe('0');
  });
});
