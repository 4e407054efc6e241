// The test kit's one git repository builder: real repositories in temporary directories, made with
// the real git CLI under an isolated configuration (no system or user config, a fixed identity), so
// results do not depend on the machine. Pure hashing tests use the in-memory reader in
// repo-files.ts instead.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * git configuration (command scope, which git trusts for this key) that lets a root test read a
 * LOCAL sandbox's workspace: a root server's sandboxes own it as an unprivileged uid of their own.
 */
export const SAFE_DIRECTORY_ENV = {
  GIT_CONFIG_COUNT: '1',
  GIT_CONFIG_KEY_0: 'safe.directory',
  GIT_CONFIG_VALUE_0: '*',
} as const;

/** The environment every kit git command runs with. */
export const GIT_ENV: NodeJS.ProcessEnv = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
  LC_ALL: 'C',
  ...SAFE_DIRECTORY_ENV,
};

/** Runs `file` synchronously in `cwd` with the kit's git environment; returns trimmed stdout. */
function run(cwd: string, file: string, args: readonly string[]): string {
  return execFileSync(file, args, {
    cwd,
    env: GIT_ENV,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 256 * 1024 * 1024,
  }).trim();
}

/** Runs git synchronously in `cwd` and returns trimmed stdout (throws with git's stderr on failure). */
export function git(cwd: string, ...args: string[]): string {
  return run(cwd, 'git', args);
}

/**
 * Runs a shell script of git commands in `cwd` as one process and returns its trimmed stdout; the
 * script's arguments are `$1`… Starting a process from a test worker forks the worker, which costs
 * in proportion to its memory (the app, PGlite): one shell that starts several gits costs one fork.
 */
function gitScript(cwd: string, script: string, ...args: string[]): string {
  return run(cwd, 'sh', ['-ec', script, 'sh', ...args]);
}

/** Current value of a ref in a repository, or null. */
export function refValue(repoDir: string, ref: string): string | null {
  try {
    return git(repoDir, 'rev-parse', '--verify', '--quiet', ref);
  } catch {
    return null;
  }
}

/** Content of a file in a commit: text, bytes, or null to delete the file. */
export type TestRepoFiles = Record<string, string | Buffer | null>;

export interface CommitOptions {
  /** @default 'change <n>' */
  message?: string;
  /** Paths made executable (mode 100755) in this commit. */
  executable?: string[];
}

export interface TestRepoOptions {
  /** Directory to build in (created if missing, kept by remove()). @default a fresh temporary directory */
  root?: string;
  /**
   * Keep a bare `upstream.git` next to the working repository and push every commit's branch to
   * it: what a project's repositoryUrl points at. Without it `url` is the working repository.
   * @default true
   */
  upstream?: boolean;
}

export interface TestRepo {
  /** What a project's repositoryUrl points at: the bare upstream, or the working repository. */
  url: string;
  /** The working repository commits are made in (branch `main`). */
  workdir: string;
  /** Same as `workdir`. */
  dir: string;
  /** git in the working repository; returns trimmed stdout. */
  git(...args: string[]): string;
  /** The commit `main` points at in `url`. */
  head(): string;
  /**
   * Writes (or with null deletes) files, commits them on the current branch (empty commits
   * allowed), pushes the branch upstream and returns the new commit id. A string option is the
   * commit message.
   */
  commit(files: TestRepoFiles, options?: string | CommitOptions): string;
  /** Branch name → commit id in `url`. */
  branches(): Record<string, string>;
  /** Deletes the repository's directory. */
  remove(): void;
}

/**
 * Creates a repository on branch `main` with one commit of `files` (null: no commit yet).
 * @default files `{ 'README.md': '# test\n' }`
 */
export function createTestRepo(
  files: TestRepoFiles | null = { 'README.md': '# test\n' },
  options: TestRepoOptions = {},
): TestRepo {
  const root = options.root ?? mkdtempSync(join(tmpdir(), 'sc-repo-'));
  mkdirSync(root, { recursive: true });
  const withUpstream = options.upstream ?? true;
  const workdir = join(root, 'work');
  const upstream = join(root, 'upstream.git');
  const url = withUpstream ? upstream : workdir;
  gitScript(
    root,
    withUpstream
      ? 'git init -q -b main "$1"\ngit init -q --bare -b main "$2"\ngit -C "$1" remote add origin "$2"'
      : 'git init -q -b main "$1"',
    workdir,
    upstream,
  );
  let counter = 0;
  const repo: TestRepo = {
    url,
    workdir,
    dir: workdir,
    git: (...args) => git(workdir, ...args),
    head: () => git(url, 'rev-parse', 'refs/heads/main'),
    commit(changes, commitOptions = {}) {
      const { message, executable = [] } =
        typeof commitOptions === 'string' ? { message: commitOptions } : commitOptions;
      for (const [path, content] of Object.entries(changes)) {
        const absolute = join(workdir, path);
        if (content === null) {
          git(workdir, 'rm', '-q', '--', path);
          continue;
        }
        mkdirSync(dirname(absolute), { recursive: true });
        writeFileSync(absolute, content);
      }
      for (const path of executable) chmodSync(join(workdir, path), 0o755);
      counter++;
      return gitScript(
        workdir,
        [
          'git add -A',
          'git commit -q --allow-empty -m "$1"',
          ...(withUpstream ? ['git push -q origin HEAD'] : []),
          'git rev-parse HEAD',
        ].join('\n'),
        message ?? `change ${counter}`,
      );
    },
    branches() {
      const out = git(url, 'for-each-ref', '--format=%(refname:short) %(objectname)', 'refs/heads');
      return Object.fromEntries(
        out
          .split('\n')
          .filter(Boolean)
          .map((line) => line.split(' ') as [string, string]),
      );
    },
    remove() {
      rmSync(root, { recursive: true, force: true });
    },
  };
  if (files) repo.commit(files, 'initial');
  return repo;
}
