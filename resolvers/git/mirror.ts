// A bare mirror per upstream under `cacheDir/mirrors`, and the git runner every part of the service
// shares. Only fetches (and the records of pushed branches) write to a mirror, and they are
// serialised per repository (in-process queue + lock file shared across processes); reads, ls-remote
// and pushes run in parallel, since none of them writes to the mirror.
import { createHash, randomUUID } from 'node:crypto';
import { access, appendFile, mkdir, rename } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import {
  classifyUnreachable,
  GitCommandError,
  GitRepositoryUnreachableError,
  gitSubcommand,
  redact,
} from './errors';
import { type GitRunResult, runGit, Semaphore } from './exec';
import { LockTimeoutError, withLock } from './lock';
import type { ParsedRepo } from './refs';

export interface MirrorOptions {
  cacheDir: string;
  timeoutMs?: number;
  maxConcurrentCommands?: number;
}

/** Remote ref to fetch and the sha the upstream reported for it (null: fetch a bare sha). */
export interface FetchTarget {
  sha: string;
  fullRef: string | null;
}

export interface GitCall {
  /** Talks to the upstream: gets the credential, and failures map to GitRepositoryUnreachableError. */
  remote?: boolean;
  maxOutputBytes?: number;
  /** Local configuration (never a credential). */
  config?: Readonly<Record<string, string>>;
}

// Mirrors are never garbage-collected or maintained behind our back: a repack deleting packs while a
// parallel push reads them is exactly the kind of failure the design avoids.
/** Commits remembered per mirror (see knownCommits) before the memory starts over. */
const KNOWN_COMMITS_PER_MIRROR = 10_000;

const MIRROR_CONFIG = `[gc]
\tauto = 0
[maintenance]
\tauto = false
[fetch]
\twriteCommitGraph = false
[core]
\tlogAllRefUpdates = false
`;

const MISSING_REMOTE_OBJECT =
  /couldn't find remote ref|not our ref|no such remote ref|unadvertised object|not valid: is this a git repository|Could not find remote branch/i;
const REF_CONFLICT = /cannot lock ref|exists; cannot create|unable to resolve reference/i;

const DEFAULT_TIMEOUT_MS = 60_000;
const LIST_OUTPUT_BYTES = 4 * 1024 * 1024;

export type Mirror = ReturnType<typeof createMirror>;

export function createMirror(options: MirrorOptions) {
  const cacheDir = resolve(options.cacheDir);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const semaphore = new Semaphore(options.maxConcurrentCommands ?? 8);
  // A lock holder runs a handful of commands, each bounded by timeoutMs.
  const lockOptions = { staleMs: timeoutMs * 3 + 10_000, acquireTimeoutMs: timeoutMs * 4 + 15_000 };
  const inflightFetches = new Map<string, Promise<string | null>>();
  /**
   * Commits known to be in each mirror (by its directory), so a session create, which cuts its
   * branch from a commit the mirror has, does not start `git cat-file` to ask again each time.
   */
  const knownCommits = new Map<string, Set<string>>();
  /** Per mirror, the newest branch record still being written (see recordPushedBranches). */
  const recording = new Map<string, Promise<void>>();

  function secretsOf(repo: ParsedRepo): string[] {
    const header = authHeader(repo);
    return [repo.credential, header, header?.replace(/^Authorization: Basic /, '')].filter(
      (secret): secret is string => typeof secret === 'string' && secret.length > 0,
    );
  }

  async function git(
    repo: ParsedRepo,
    args: readonly string[],
    call: GitCall = {},
    stdin?: Buffer,
  ): Promise<GitRunResult> {
    const header = call.remote ? authHeader(repo) : null;
    try {
      return await semaphore.run(() =>
        runGit(args, {
          cwd: cacheDir,
          timeoutMs,
          maxOutputBytes: call.maxOutputBytes ?? LIST_OUTPUT_BYTES,
          config: { ...call.config, ...(header ? { 'http.extraHeader': header } : {}) },
          ...(stdin ? { stdin } : {}),
        }),
      );
    } catch (error) {
      throw new GitCommandError(
        args,
        null,
        '',
        `could not start git (${(error as Error).message}); is git installed?`,
      );
    }
  }

  /** The error for a failed command, with every credential redacted. */
  function failure(
    repo: ParsedRepo,
    args: readonly string[],
    result: GitRunResult,
    call: GitCall = {},
  ): Error {
    const secrets = secretsOf(repo);
    const stderr = redact(result.stderr, secrets);
    const safeArgs = args.map((arg) => redact(arg, secrets));
    if (result.timedOut) {
      if (call.remote) {
        return new GitRepositoryUnreachableError(
          repo.url,
          `git ${gitSubcommand(args)} timed out after ${timeoutMs} ms`,
          'Check that the server is up and reachable from this machine, or raise timeoutMs for very large repositories.',
        );
      }
      return new GitCommandError(safeArgs, null, stderr, `timed out after ${timeoutMs} ms`);
    }
    if (result.outputTooLarge)
      return new GitCommandError(safeArgs, null, stderr, 'output exceeded the size limit');
    if (call.remote) {
      const row = classifyUnreachable(stderr);
      if (row) return new GitRepositoryUnreachableError(repo.url, row.reason, row.hint);
    }
    return new GitCommandError(safeArgs, result.exitCode, stderr);
  }

  function mirrorPaths(repo: ParsedRepo): { dir: string; lock: string } {
    const hash = createHash('sha256').update(repo.url).digest('hex').slice(0, 24);
    const label = basename(repo.url.replace(/[/\\]+$/, '').replace(/\.git$/, ''))
      .replace(/[^A-Za-z0-9_-]+/g, '-')
      .slice(0, 40);
    const name = `${label || 'repo'}-${hash}`;
    return { dir: join(cacheDir, 'mirrors', `${name}.git`), lock: join(cacheDir, 'locks', `${name}.lock`) };
  }

  function locked<T>(repo: ParsedRepo, task: () => Promise<T>): Promise<T> {
    return withLock(mirrorPaths(repo).lock, lockOptions, task).catch((error: unknown) => {
      if (error instanceof LockTimeoutError) {
        throw new GitCommandError(['fetch'], null, '', error.message);
      }
      throw error;
    });
  }

  async function ensureMirror(repo: ParsedRepo): Promise<string> {
    const { dir } = mirrorPaths(repo);
    if (await exists(join(dir, 'HEAD'))) return dir;
    // A mirror removed from the cache takes its commits with it.
    knownCommits.delete(dir);
    await mkdir(join(cacheDir, 'mirrors'), { recursive: true });
    await locked(repo, async () => {
      if (await exists(join(dir, 'HEAD'))) return;
      // Built aside and renamed into place, so a crash never leaves a half-initialised mirror.
      const staging = `${dir}.init-${randomUUID()}`;
      const args = ['init', '--bare', '--quiet', '--', staging];
      const result = await git(repo, args);
      if (result.exitCode !== 0) throw failure(repo, args, result);
      await appendFile(join(staging, 'config'), MIRROR_CONFIG);
      await rename(staging, dir);
    });
    return dir;
  }

  async function lsRemote(repo: ParsedRepo, dir: string, patterns: string[], flags: string[] = []) {
    const args = [`--git-dir=${dir}`, 'ls-remote', ...flags, '--', repo.url, ...patterns];
    const result = await git(repo, args, { remote: true });
    if (result.exitCode !== 0) throw failure(repo, args, result, { remote: true });
    const refs = new Map<string, string>();
    for (const line of result.stdout.toString('utf8').split('\n')) {
      const [sha, name] = line.split('\t');
      if (sha && name) refs.set(name, sha);
    }
    return refs;
  }

  async function hasCommit(repo: ParsedRepo, dir: string, sha: string): Promise<boolean> {
    if (knownCommits.get(dir)?.has(sha)) return true;
    const args = [`--git-dir=${dir}`, 'cat-file', '-e', `${sha}^{commit}`];
    const result = await git(repo, args);
    if (result.timedOut) throw failure(repo, args, result);
    if (result.exitCode !== 0) return false;
    remember(dir, sha);
    return true;
  }

  /** Notes a commit present in a mirror, which keeps it: mirrors never run gc (MIRROR_CONFIG). */
  function remember(dir: string, sha: string): void {
    let shas = knownCommits.get(dir);
    if (!shas) {
      shas = new Set();
      knownCommits.set(dir, shas);
    }
    if (shas.size >= KNOWN_COMMITS_PER_MIRROR) shas.clear();
    shas.add(sha);
  }

  async function mirrorRefValue(repo: ParsedRepo, dir: string, ref: string): Promise<string | null> {
    const args = [`--git-dir=${dir}`, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`];
    const result = await git(repo, args);
    if (result.timedOut) throw failure(repo, args, result);
    return result.exitCode === 0 ? result.stdout.toString('utf8').trim() : null;
  }

  /** Where a remote ref is stored in the mirror: branches and tags under their own names. */
  function mirrorRefFor(target: FetchTarget): string {
    if (target.fullRef === null) return `refs/mirror/commits/${target.sha}`;
    if (target.fullRef === 'HEAD') return 'refs/mirror/HEAD';
    return target.fullRef;
  }

  /**
   * Makes sure the mirror has the target's commit (and, with `needRef`, that the mirror's copy of the
   * ref points at it). Returns the commit, a newer one if the ref moved meanwhile, or null when the
   * upstream does not have it.
   */
  async function ensureCommit(
    repo: ParsedRepo,
    dir: string,
    target: FetchTarget,
    needRef = false,
  ): Promise<string | null> {
    const present = needRef
      ? (await mirrorRefValue(repo, dir, mirrorRefFor(target))) === target.sha
      : await hasCommit(repo, dir, target.sha);
    if (present) return target.sha;

    // Callers in this process that need the same ref share one fetch.
    const key = [dir, target.fullRef ?? '', target.sha, needRef].join('\0');
    let pending = inflightFetches.get(key);
    if (!pending) {
      pending = locked(repo, () => fetchIntoMirror(repo, dir, target, needRef)).finally(() =>
        inflightFetches.delete(key),
      );
      inflightFetches.set(key, pending);
    }
    return pending;
  }

  async function fetchIntoMirror(
    repo: ParsedRepo,
    dir: string,
    target: FetchTarget,
    needRef: boolean,
  ): Promise<string | null> {
    const destination = mirrorRefFor(target);
    // Another process may have fetched it while we waited for the lock.
    const already = needRef
      ? (await mirrorRefValue(repo, dir, destination)) === target.sha
      : await hasCommit(repo, dir, target.sha);
    if (already) return target.sha;

    const source = target.fullRef ?? target.sha;
    const args = [
      `--git-dir=${dir}`,
      'fetch',
      '--quiet',
      '--no-tags',
      '--no-write-fetch-head',
      '--no-auto-maintenance',
      '--no-recurse-submodules',
      '--',
      repo.url,
      `+${source}:${destination}`,
    ];
    let result = await git(repo, args, { remote: true });
    if (result.exitCode !== 0 && target.fullRef !== null && REF_CONFLICT.test(result.stderr)) {
      // The upstream replaced branch `a` with `a/b` (or the reverse): drop our stale copies, retry.
      await dropConflictingRefs(repo, dir, destination);
      result = await git(repo, args, { remote: true });
    }
    if (result.exitCode !== 0) {
      if (
        !result.timedOut &&
        MISSING_REMOTE_OBJECT.test(result.stderr) &&
        !classifyUnreachable(result.stderr)
      ) {
        return null;
      }
      throw failure(repo, args, result, { remote: true });
    }
    if (await hasCommit(repo, dir, target.sha)) {
      if (!needRef || (await mirrorRefValue(repo, dir, destination)) === target.sha) return target.sha;
    }
    // The ref moved (or was force-pushed) between ls-remote and fetch: use what we fetched.
    return target.fullRef === null ? null : mirrorRefValue(repo, dir, destination);
  }

  async function dropConflictingRefs(repo: ParsedRepo, dir: string, ref: string): Promise<void> {
    const parts = ref.split('/');
    const ancestors = parts.slice(2, -1).map((_, index) => parts.slice(0, index + 3).join('/'));
    const args = [`--git-dir=${dir}`, 'for-each-ref', '--format=%(refname)', '--', ref, ...ancestors];
    const result = await git(repo, args);
    if (result.exitCode !== 0) throw failure(repo, args, result);
    const conflicting = result.stdout
      .toString('utf8')
      .split('\n')
      .filter((name) => name.startsWith(`${ref}/`) || ancestors.includes(name));
    for (const name of conflicting) {
      const deleteArgs = [`--git-dir=${dir}`, 'update-ref', '-d', name];
      const deleted = await git(repo, deleteArgs);
      if (deleted.exitCode !== 0) throw failure(repo, deleteArgs, deleted);
    }
  }

  /**
   * Brings every upstream branch and tag into the mirror (deleted ones are pruned). Serialised with
   * every other write to the mirror.
   */
  async function sync(repo: ParsedRepo): Promise<string> {
    const dir = await ensureMirror(repo);
    await locked(repo, async () => {
      const args = [
        `--git-dir=${dir}`,
        'fetch',
        '--quiet',
        '--prune',
        '--no-tags',
        '--no-write-fetch-head',
        '--no-auto-maintenance',
        '--no-recurse-submodules',
        '--',
        repo.url,
        '+refs/heads/*:refs/heads/*',
        '+refs/tags/*:refs/tags/*',
      ];
      let result = await git(repo, args, { remote: true });
      if (result.exitCode !== 0 && REF_CONFLICT.test(result.stderr)) {
        // A branch `a` replaced by `a/b` upstream (or the reverse): drop every local branch, refetch.
        const drop = [`--git-dir=${dir}`, 'for-each-ref', '--format=delete %(refname)', 'refs/heads'];
        const listed = await git(repo, drop);
        await git(repo, [`--git-dir=${dir}`, 'update-ref', '--stdin'], {}, listed.stdout);
        result = await git(repo, args, { remote: true });
      }
      if (result.exitCode !== 0) throw failure(repo, args, result, { remote: true });
    });
    return dir;
  }

  /**
   * Stores the branches a push just created upstream in the mirror too (one `update-ref` for the
   * batch, under the mirror's lock), so the workspace clone that follows finds its branch there
   * instead of fetching it back. Best effort: if it fails, the clone fetches the branch as before.
   *
   * The cuts do not wait for it (under load it took 11–59 ms of every create). It joins the lock's
   * queue at once, so every later locked use of the mirror comes after it: the clone's fetch looks
   * again under the lock and finds the branch. mirrorDir waits for it.
   */
  function recordPushedBranches(
    repo: ParsedRepo,
    dir: string,
    pushed: ReadonlyArray<{ ref: string; commit: string }>,
  ): void {
    if (pushed.length === 0) return;
    const stdin = Buffer.from(pushed.map((t) => `update ${t.ref} ${t.commit}\n`).join(''));
    const written = locked(repo, () =>
      git(repo, [`--git-dir=${dir}`, 'update-ref', '--stdin'], {}, stdin),
    ).then(
      () => undefined,
      () => undefined,
    );
    // The lock runs its tasks in order, so this record lands after any earlier one of the mirror:
    // waiting for the newest waits for them all.
    recording.set(dir, written);
    void written.then(() => {
      if (recording.get(dir) === written) recording.delete(dir);
    });
  }

  /** Resolves once the branch records started so far for the mirror `dir` are written. */
  function recorded(dir: string): Promise<void> | undefined {
    return recording.get(dir);
  }

  return {
    git,
    failure,
    secretsOf,
    mirrorPaths,
    locked,
    ensureMirror,
    lsRemote,
    ensureCommit,
    sync,
    recordPushedBranches,
    recorded,
  };
}

/** `Authorization` header value for an https upstream with a credential, else null. */
function authHeader(repo: ParsedRepo): string | null {
  if (!repo.isHttp || !repo.credential) return null;
  const userPass = repo.credential.includes(':') ? repo.credential : `x-access-token:${repo.credential}`;
  return `Authorization: Basic ${Buffer.from(userPass, 'utf8').toString('base64')}`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
