// The git service's public shapes (see git.ts for the service itself).
import type { BatchTicket } from '../batch';
import type { GitRunResult } from './exec';
import type { RepoRef } from './refs';

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
