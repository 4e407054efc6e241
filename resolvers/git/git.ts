// Server-side git: resolves refs in upstream repositories, cuts session branches (R-SES-3), reads
// files at a commit and makes working clones for the LOCAL provider. Upstream credentials stay on
// the server (R-GIT-1): they reach git only as in-memory configuration and are redacted from errors.
//
// Each upstream gets a bare mirror under `cacheDir/mirrors`. Only fetches write to a mirror and they
// are serialised per repository (in-process queue + lock file shared across processes); reads,
// ls-remote and pushes run in parallel, since none of them writes to the mirror. Concurrent ref
// lookups against one upstream share one ls-remote, and concurrent branch cuts one push (session
// creates arrive in bursts); each such batch starts after all its callers asked, so none of them
// sees an answer older than its question, unless it asks for one: resolveRef takes a maxAgeMs, and
// session creates accept a ref answer up to SINGULACOMP_REF_CACHE_MS old (pushes made through this
// service forget them). A create announces its cut before it is admitted (expectCut), and a push
// about to start waits briefly for announced cuts (see PUSH_LINGER_MS).
import { createHash, randomUUID } from 'node:crypto';
import { access, appendFile, mkdir, rename, rm } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import {
  classifyUnreachable,
  GitBranchExistsError,
  GitCommandError,
  GitRefNotFoundError,
  GitRepositoryUnreachableError,
  gitSubcommand,
  redact,
} from './errors';
import { type BatchTicket, createKeyedBatcher, type Settled } from '../batch';
import { type GitRunResult, runGit, Semaphore } from './exec';
import { LockTimeoutError, withLock } from './lock';
import {
  assertBranchName,
  assertRefName,
  isFullSha,
  normalizeRepoPath,
  type ParsedRepo,
  parseRepo,
  type RepoRef,
  refCandidates,
} from './refs';

export {
  GitBranchExistsError,
  GitCommandError,
  GitError,
  GitInvalidPathError,
  GitInvalidRefNameError,
  GitInvalidUrlError,
  GitRefNotFoundError,
  GitRepositoryUnreachableError,
} from './errors';
export type { RepoRef } from './refs';

export interface GitServiceOptions {
  /** Directory holding one bare mirror per upstream and their lock files; several processes may share it. */
  cacheDir: string;
  /**
   * Limit for every single git command; a remote command that exceeds it is reported as unreachable.
   * @default 60_000
   */
  timeoutMs?: number;
  /**
   * git processes one service runs at once (a cutBranch runs about three).
   * @default 8
   */
  maxConcurrentCommands?: number;
  /**
   * Largest file readFileAtRef returns; bigger files fail with GitCommandError.
   * @default 64 MiB
   */
  maxFileBytes?: number;
  /**
   * Longest a push waits for cuts announced with expectCut; never longer than the repository's last
   * push took.
   * @default 500
   */
  pushLingerMs?: number;
  /** Milliseconds since the epoch, for the age of remembered ref answers (tests move it). */
  now?: () => number;
}

/** How fresh a remembered ref answer must be for a caller to take it instead of asking upstream. */
export interface RefLookup {
  /**
   * Accept the answer of a lookup that started at most this long ago (0: ask the upstream). Only
   * found refs are remembered, and a push this service makes to the upstream forgets its answers.
   */
  maxAgeMs?: number;
}

/** A commit present in the local mirror, for code that reads objects itself (`git --git-dir=<mirrorDir>`). */
export interface MirroredCommit {
  commit: string;
  mirrorDir: string;
}

export interface GitService {
  /** Commit sha of a branch, tag, `refs/…` name, `HEAD` or full sha upstream; null when it does not exist. */
  resolveRef(repo: RepoRef, ref: string, lookup?: RefLookup): Promise<string | null>;
  /** Short name of the branch the upstream's HEAD points to; null for an empty repository. */
  defaultBranch(repo: RepoRef): Promise<string | null>;
  branchExists(repo: RepoRef, branch: string): Promise<boolean>;
  /**
   * Creates `refs/heads/<branch>` upstream at the commit `baseRef` resolves to now. Never moves an
   * existing branch: throws GitBranchExistsError instead (also when it already points there).
   */
  cutBranch(
    repo: RepoRef,
    baseRef: string,
    branch: string,
    ticket?: BatchTicket,
  ): Promise<{ commit: string }>;
  /**
   * Announces a cutBranch against `repo` that will follow (a session create still being admitted),
   * so a push about to start waits briefly for it and both share one push. Hand the ticket to that
   * cutBranch, or call it if the cut will not come; a ticket left open only delays pushes by the
   * bounded wait.
   */
  expectCut(repo: RepoRef): BatchTicket;
  /** Resolves `ref` upstream and makes sure the commit is in the mirror; null when the ref does not exist. */
  fetchRef(repo: RepoRef, ref: string): Promise<MirroredCommit | null>;
  /**
   * A file's bytes at `ref`; null when the ref or the file does not exist. Pass a full sha to read from
   * the mirror without contacting the upstream.
   */
  readFileAtRef(repo: RepoRef, ref: string, path: string): Promise<Buffer | null>;
  /**
   * The repository's bare mirror (created empty if needed), once the branches this service cut are
   * recorded in it; read it with `git --git-dir=<dir>`. Not from a withMirrorLock task: the records
   * it waits for need that lock.
   */
  mirrorDir(repo: RepoRef): Promise<string>;
  /**
   * Clones `branch` into the new or empty `targetDir`. The clone's origin is `workspace.originUrl`
   * (the git proxy, for sandboxes), else the credential-free upstream URL; `workspace.config` is
   * written to the clone's .git/config (the credential helper).
   */
  cloneWorkspace(
    repo: RepoRef,
    branch: string,
    targetDir: string,
    workspace?: WorkspaceGitOptions,
  ): Promise<{ commit: string }>;
  /**
   * Brings every upstream branch and tag into the mirror (deleted ones are pruned) and returns the
   * mirror's directory. Serialised with every other write to the mirror.
   */
  syncMirror(repo: RepoRef): Promise<string>;
  /** Runs `task` holding the mirror's write lock (in-process and across processes). */
  withMirrorLock<T>(repo: RepoRef, task: (mirrorDir: string) => Promise<T>): Promise<T>;
  /**
   * Pushes commits present in the mirror to the upstream with the server-held credential. Each
   * update is refused upstream unless the ref still holds `oldSha` (null: must not exist).
   * Returns the upstream's verdict per ref; never throws for a refusal, only when unreachable.
   */
  pushToUpstream(repo: RepoRef, updates: readonly RefUpdate[]): Promise<RefUpdateResult[]>;
  /** A local git command against the mirror (no upstream, no credential): merges, diffs, commit-tree. */
  inMirror(
    repo: RepoRef,
    args: readonly string[],
    config?: Readonly<Record<string, string>>,
  ): Promise<GitRunResult>;
}

export interface WorkspaceGitOptions {
  originUrl?: string;
  config?: Readonly<Record<string, string>>;
}

export interface RefUpdate {
  ref: string;
  oldSha: string | null;
  newSha: string;
}

export interface RefUpdateResult {
  ref: string;
  ok: boolean;
  /** The upstream's reason when refused. */
  reason: string | null;
}

interface LsRemoteCall {
  repo: ParsedRepo;
  dir: string;
  patterns: string[];
}

interface PushCall {
  repo: ParsedRepo;
  dir: string;
  commit: string;
  branch: string;
}

/** Remote ref to fetch and the sha the upstream reported for it (null: fetch a bare sha). */
interface FetchTarget {
  sha: string;
  fullRef: string | null;
}

interface GitCall {
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
const MISSING_FILE =
  /does not exist|exists on disk, but not in|bad file|Not a valid object name|not a valid|expected blob/i;
const REF_CONFLICT = /cannot lock ref|exists; cannot create|unable to resolve reference/i;
const PUSH_REJECTED_BECAUSE_EXISTS = /stale info|fetch first|non-fast-forward|already exists/i;

const DEFAULT_TIMEOUT_MS = 60_000;
/** Most ref lookups or branch cuts one git invocation carries. */
const MAX_REFS_PER_CALL = 64;
/**
 * Longest a push waits for announced cuts by default. A push costs about the same for one branch as
 * for twenty, so on a burst a push that left without the creates admitted a moment after it made
 * them wait for it and then pay a push of their own: with 20 concurrent creates, pushes alternated
 * between one branch and nineteen.
 */
const PUSH_LINGER_MS = 500;
const LIST_OUTPUT_BYTES = 4 * 1024 * 1024;

export function createGitService(options: GitServiceOptions): GitService {
  const cacheDir = resolve(options.cacheDir);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxFileBytes = options.maxFileBytes ?? 64 * 1024 * 1024;
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
  const now = options.now ?? Date.now;
  /**
   * Ref answers by batch key and ref name, with the time their lookup started: a burst of session
   * creates from one project's default branch asks the upstream once per window, not once per batch.
   */
  const resolvedRefs = new Map<string, { sha: string; askedAt: number }>();
  const forgottenAt = new Map<string, number>();
  const REMEMBERED_REFS_MAX = 10_000;

  /** Batches share a git call only with callers of the same upstream and the same credential. */
  function batchKey(repo: ParsedRepo, dir: string): string {
    return `${dir}\0${createHash('sha256')
      .update(repo.credential ?? '')
      .digest('hex')}`;
  }

  const sharedLsRemote = createKeyedBatcher<LsRemoteCall, Map<string, string>>(
    async (_key, calls) => {
      const [first] = calls as [LsRemoteCall];
      const refs = await lsRemote(first.repo, first.dir, [...new Set(calls.flatMap((c) => c.patterns))]);
      return calls.map(() => ({ ok: true, value: refs }));
    },
    { maxBatch: MAX_REFS_PER_CALL },
  );

  const sharedPush = createKeyedBatcher<PushCall, void>((_key, calls) => pushBranches(calls), {
    maxBatch: MAX_REFS_PER_CALL,
    lingerMs: options.pushLingerMs ?? PUSH_LINGER_MS,
  });

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

  /** The first candidate of `ref` present in an ls-remote listing; tags are peeled to their commit. */
  function pick(refs: Map<string, string>, ref: string): FetchTarget | null {
    for (const candidate of refCandidates(ref)) {
      const sha = refs.get(`${candidate}^{}`) ?? refs.get(candidate);
      if (sha) return { sha, fullRef: candidate };
    }
    return null;
  }

  function lsRemotePatterns(ref: string): string[] {
    return refCandidates(ref).flatMap((candidate) =>
      candidate.startsWith('refs/tags/') ? [candidate, `${candidate}^{}`] : [candidate],
    );
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

  /** Resolves `ref` to a fetch target: ls-remote for names, the sha itself for full shas. */
  async function resolveTarget(repo: ParsedRepo, dir: string, ref: string): Promise<FetchTarget | null> {
    if (isFullSha(ref)) return { sha: ref, fullRef: null };
    return pick(
      await sharedLsRemote(batchKey(repo, dir), { repo, dir, patterns: lsRemotePatterns(ref) }),
      ref,
    );
  }

  async function fetchRefParsed(repo: ParsedRepo, ref: string): Promise<MirroredCommit | null> {
    assertRefName(ref);
    const dir = await ensureMirror(repo);
    const target = await resolveTarget(repo, dir, ref);
    if (!target) return null;
    const commit = await ensureCommit(repo, dir, target);
    return commit ? { commit, mirrorDir: dir } : null;
  }

  /**
   * Creates each call's branch upstream in one `git push` (one refspec and one lease per branch; not
   * atomic, so each branch gets its own verdict). The lease with an empty expected value means "the
   * ref must not exist": git refuses to create over an existing branch, and the server re-checks
   * atomically when it updates the ref. A branch named twice in one batch is pushed once; the other
   * caller gets GitBranchExistsError (or the same failure).
   */
  async function pushBranches(calls: PushCall[]): Promise<Array<Settled<void>>> {
    const [{ repo, dir }] = calls as [PushCall];
    const unique = new Map<string, PushCall>();
    for (const call of calls) if (!unique.has(call.branch)) unique.set(call.branch, call);
    const targets = [...unique.values()].map((call) => ({ ...call, ref: `refs/heads/${call.branch}` }));
    const args = [
      `--git-dir=${dir}`,
      'push',
      '--porcelain',
      '--no-verify',
      ...targets.map((t) => `--force-with-lease=${t.ref}:`),
      '--',
      repo.url,
      ...targets.map((t) => `${t.commit}:${t.ref}`),
    ];
    const result = await git(repo, args, { remote: true });
    const lines = new Map<string, string[]>();
    for (const fields of result.stdout
      .toString('utf8')
      .split('\n')
      .map((row) => row.split('\t'))) {
      const destination = fields.length >= 3 ? fields[1]?.split(':').at(-1) : undefined;
      if (destination) lines.set(destination, fields);
    }
    const verdicts = new Map<string, Settled<void>>();
    const unclear: typeof targets = [];
    for (const target of targets) {
      const line = lines.get(target.ref);
      if (!line) {
        verdicts.set(target.branch, { ok: false, error: failure(repo, args, result, { remote: true }) });
        continue;
      }
      const [flag, , summary = ''] = line;
      if (flag === '*') verdicts.set(target.branch, { ok: true, value: undefined });
      else if (flag === '=' || PUSH_REJECTED_BECAUSE_EXISTS.test(summary)) {
        verdicts.set(target.branch, { ok: false, error: new GitBranchExistsError(target.branch, repo.url) });
      } else unclear.push(target);
    }
    if (unclear.length > 0) {
      // Rejected for another reason, e.g. a concurrent creation seen by the server or a hook.
      const now = await lsRemote(
        repo,
        dir,
        unclear.map((t) => t.ref),
      ).catch(() => new Map<string, string>());
      for (const target of unclear) {
        const summary = lines.get(target.ref)?.[2] ?? '';
        verdicts.set(target.branch, {
          ok: false,
          error: now.has(target.ref)
            ? new GitBranchExistsError(target.branch, repo.url)
            : new GitCommandError(
                args.map((arg) => redact(arg, secretsOf(repo))),
                result.exitCode,
                redact(result.stderr, secretsOf(repo)),
                `push of ${target.ref} was rejected: ${redact(summary, secretsOf(repo))}`,
              ),
        });
      }
    }
    recordPushedBranches(
      repo,
      dir,
      targets.filter((t) => verdicts.get(t.branch)?.ok === true),
    );
    return calls.map((call): Settled<void> => {
      const verdict = verdicts.get(call.branch) ?? { ok: false, error: failure(repo, args, result) };
      if (unique.get(call.branch) === call || !verdict.ok) return verdict;
      return { ok: false, error: new GitBranchExistsError(call.branch, repo.url) };
    });
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

  /** cutBranch's work; the ticket is used up when the cut joins a push. */
  async function cut(
    repoRef: RepoRef,
    baseRef: string,
    branch: string,
    ticket: BatchTicket | undefined,
  ): Promise<{ commit: string }> {
    assertRefName(baseRef);
    assertBranchName(branch);
    const repo = parseRepo(repoRef);
    const dir = await ensureMirror(repo);
    const targetRef = `refs/heads/${branch}`;
    let target: FetchTarget | null = { sha: baseRef, fullRef: null };
    if (!isFullSha(baseRef)) {
      // One round trip answers both "does the branch exist?" and "where is the base?". From a full
      // sha there is nothing to look up: the push's lease refuses an existing branch.
      const refs = await sharedLsRemote(batchKey(repo, dir), {
        repo,
        dir,
        patterns: [...lsRemotePatterns(baseRef), targetRef],
      });
      if (refs.has(targetRef)) throw new GitBranchExistsError(branch, repo.url);
      target = pick(refs, baseRef);
    }
    const commit = target ? await ensureCommit(repo, dir, target) : null;
    if (!commit) throw new GitRefNotFoundError(baseRef, repo.url);
    await sharedPush(batchKey(repo, dir), { repo, dir, commit, branch }, ticket);
    return { commit };
  }

  /**
   * Forgets every remembered ref answer of the mirror `dir` (any credential); an answer whose lookup
   * started before this moment is not remembered when it arrives later.
   */
  function forgetRefs(dir: string): void {
    forgottenAt.set(dir, now());
    for (const key of resolvedRefs.keys()) if (key.startsWith(`${dir}\0`)) resolvedRefs.delete(key);
  }

  function rememberRef(dir: string, key: string, sha: string, askedAt: number): void {
    if (askedAt <= (forgottenAt.get(dir) ?? Number.NEGATIVE_INFINITY)) return;
    if (resolvedRefs.size >= REMEMBERED_REFS_MAX) resolvedRefs.clear();
    resolvedRefs.set(key, { sha, askedAt });
  }

  return {
    async resolveRef(repoRef, ref, lookup = {}) {
      assertRefName(ref);
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const maxAgeMs = lookup.maxAgeMs ?? 0;
      const key = `${batchKey(repo, dir)}\0${ref}`;
      const askedAt = now();
      if (maxAgeMs > 0 && !isFullSha(ref)) {
        const remembered = resolvedRefs.get(key);
        if (remembered && askedAt - remembered.askedAt <= maxAgeMs) return remembered.sha;
      }
      const target = await resolveTarget(repo, dir, ref);
      if (!target) return null;
      // A bare sha is only known to exist upstream once it is fetched.
      if (target.fullRef === null) return ensureCommit(repo, dir, target);
      rememberRef(dir, key, target.sha, askedAt);
      return target.sha;
    },

    async defaultBranch(repoRef) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const args = [`--git-dir=${dir}`, 'ls-remote', '--symref', '--', repo.url, 'HEAD'];
      const result = await git(repo, args, { remote: true });
      if (result.exitCode !== 0) throw failure(repo, args, result, { remote: true });
      const match = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(result.stdout.toString('utf8'));
      return match?.[1] ?? null;
    },

    async branchExists(repoRef, branch) {
      assertBranchName(branch);
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const targetRef = `refs/heads/${branch}`;
      return (await lsRemote(repo, dir, [targetRef])).has(targetRef);
    },

    expectCut(repoRef) {
      const repo = parseRepo(repoRef);
      return sharedPush.expect(batchKey(repo, mirrorPaths(repo).dir));
    },

    async cutBranch(repoRef, baseRef, branch, ticket) {
      try {
        return await cut(repoRef, baseRef, branch, ticket);
      } finally {
        ticket?.(); // a cut that failed before its push will not come
      }
    },

    fetchRef(repoRef, ref) {
      return fetchRefParsed(parseRepo(repoRef), ref);
    },

    async readFileAtRef(repoRef, ref, path) {
      const repo = parseRepo(repoRef);
      const file = normalizeRepoPath(path);
      const at = await fetchRefParsed(repo, ref);
      if (!at) return null;
      const args = [`--git-dir=${at.mirrorDir}`, 'cat-file', 'blob', `${at.commit}:${file}`];
      const result = await git(repo, args, { maxOutputBytes: maxFileBytes });
      if (result.exitCode === 0 && !result.outputTooLarge) return result.stdout;
      if (result.outputTooLarge) {
        throw new GitCommandError(
          args,
          null,
          '',
          `${file} is larger than maxFileBytes (${maxFileBytes} bytes)`,
        );
      }
      if (!result.timedOut && MISSING_FILE.test(result.stderr)) return null;
      throw failure(repo, args, result);
    },

    async mirrorDir(repoRef) {
      const dir = await ensureMirror(parseRepo(repoRef));
      await recording.get(dir);
      return dir;
    },

    async cloneWorkspace(repoRef, branch, targetDir, workspace = {}) {
      assertBranchName(branch);
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const targetRef = `refs/heads/${branch}`;
      const target = pick(await lsRemote(repo, dir, [targetRef]), targetRef);
      // needRef: the local clone below checks out the mirror's copy of the branch.
      const commit = target ? await ensureCommit(repo, dir, target, true) : null;
      if (!commit) throw new GitRefNotFoundError(branch, repo.url);

      const destination = resolve(targetDir);
      // A local clone hard-links the mirror's objects (copies across file systems); no alternates
      // remain, so the workspace does not depend on the cache.
      // The clone writes the workspace's configuration itself (`--config`, one process instead of
      // one per key); a key git could not split from its value at the first '=' is set on its own.
      const entries = Object.entries(workspace.config ?? {});
      const inline = entries.filter(([key]) => !key.includes('='));
      const cloneArgs = [
        'clone',
        '--quiet',
        '--single-branch',
        '--branch',
        branch,
        ...inline.flatMap(([key, value]) => ['--config', `${key}=${value}`]),
        '--',
        dir,
        destination,
      ];
      const cloned = await git(repo, cloneArgs);
      if (cloned.exitCode !== 0) throw failure(repo, cloneArgs, cloned);
      try {
        const setUrl = ['-C', destination, 'remote', 'set-url', 'origin', workspace.originUrl ?? repo.url];
        const updated = await git(repo, setUrl);
        if (updated.exitCode !== 0) throw failure(repo, setUrl, updated);
        for (const [key, value] of entries.filter(([key]) => key.includes('='))) {
          const configArgs = ['-C', destination, 'config', '--local', key, value];
          const configured = await git(repo, configArgs);
          if (configured.exitCode !== 0) throw failure(repo, configArgs, configured);
        }
        const headArgs = ['-C', destination, 'rev-parse', 'HEAD'];
        const head = await git(repo, headArgs);
        if (head.exitCode !== 0) throw failure(repo, headArgs, head);
        return { commit: head.stdout.toString('utf8').trim() };
      } catch (error) {
        // Never leave a workspace whose origin still points at the cache.
        await rm(destination, { recursive: true, force: true });
        throw error;
      }
    },

    async syncMirror(repoRef) {
      const repo = parseRepo(repoRef);
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
    },

    async withMirrorLock(repoRef, task) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      return locked(repo, () => task(dir));
    },

    async pushToUpstream(repoRef, updates) {
      if (updates.length === 0) return [];
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      for (const update of updates) assertRefName(update.ref);
      // Whatever the push does, remembered answers may now be stale: forget them before and after.
      forgetRefs(dir);
      const args = [
        `--git-dir=${dir}`,
        'push',
        '--porcelain',
        '--no-verify',
        // A local repository may be an ordinary one with the branch checked out (the usual case in
        // development): update its branch and, when its work tree is clean, the work tree too, as
        // git's receive.denyCurrentBranch=updateInstead does; a dirty work tree refuses the push.
        // Bare repositories ignore the setting.
        ...(isLocalUrl(repo.url) ? [`--receive-pack=${UPDATE_INSTEAD_RECEIVE_PACK}`] : []),
        ...(updates.length > 1 ? ['--atomic'] : []),
        ...updates.map((u) => `--force-with-lease=${u.ref}:${u.oldSha ?? ''}`),
        '--',
        repo.url,
        ...updates.map((u) => `${u.newSha}:${u.ref}`),
      ];
      const result = await git(repo, args, { remote: true });
      forgetRefs(dir);
      const lines = result.stdout
        .toString('utf8')
        .split('\n')
        .map((row) => row.split('\t'));
      const secrets = secretsOf(repo);
      const results = updates.map((update): RefUpdateResult | null => {
        const line = lines.find((fields) => fields.length >= 3 && fields[1]?.endsWith(`:${update.ref}`));
        if (!line) return null;
        const [flag, , summary = ''] = line;
        const ok = flag !== '!';
        return { ref: update.ref, ok, reason: ok ? null : redact(summary, secrets) };
      });
      // No porcelain line for a ref: the push never got that far (unreachable, auth, timeout).
      if (results.some((r) => r === null)) throw failure(repo, args, result, { remote: true });
      return results as RefUpdateResult[];
    },

    async inMirror(repoRef, args, config) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      return git(repo, [`--git-dir=${dir}`, ...args], { config });
    },
  };
}

/** receive-pack for pushes into local repositories (see pushToUpstream). */
const UPDATE_INSTEAD_RECEIVE_PACK = 'git -c receive.denyCurrentBranch=updateInstead receive-pack';

function isLocalUrl(url: string): boolean {
  return url.startsWith('/') || url.startsWith('file://');
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
