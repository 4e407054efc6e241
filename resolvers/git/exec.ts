// Runs the git CLI: argument arrays only, a scrubbed environment (no user or system config, no
// prompts, no inherited GIT_* variables), a timeout that kills the whole process group, and bounded
// output. Credentials travel as GIT_CONFIG_* environment entries: never on the command line (visible
// in `ps`), never in a URL, never on disk.
import { type ChildProcess, spawn } from 'node:child_process';
import { type RunnerResult, runInHelper } from './runner';

export interface GitRunOptions {
  /** Directory git runs in; commands pass --git-dir/-C explicitly, this only stops repository discovery. */
  cwd: string;
  timeoutMs: number;
  /** stdout beyond this fails the command. */
  maxOutputBytes: number;
  /** Extra configuration, passed as GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n. */
  config?: Readonly<Record<string, string>>;
  /** Bytes written to git's stdin (otherwise stdin is closed). */
  stdin?: Buffer;
}

/** A finished command: its exit code (null when killed), bounded output, and why it was killed. */
export type GitRunResult = RunnerResult;

// Only what git needs to find itself, ssh keys/agent and an outbound proxy; everything else, notably
// GIT_DIR, GIT_ASKPASS and GIT_CONFIG_* set by a parent process, stays out.
const INHERITED_ENV = [
  'PATH',
  'HOME',
  'TMPDIR',
  'SSH_AUTH_SOCK',
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'NO_PROXY',
  'https_proxy',
  'http_proxy',
  'no_proxy',
];

const FIXED_ENV: Readonly<Record<string, string>> = {
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_ALLOW_PROTOCOL: 'file:git:http:https:ssh',
  GIT_SSH_COMMAND: 'ssh -o BatchMode=yes -o ConnectTimeout=15',
  GIT_NO_REPLACE_OBJECTS: '1',
  LC_ALL: 'C',
  LANGUAGE: 'C',
};

export function childEnv(
  cwd: string,
  config: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  // Child-process plumbing, not configuration: the server's env.ts owns configuration.
  for (const key of INHERITED_ENV) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  Object.assign(env, FIXED_ENV);
  // Never discover (and read the config of) a repository that happens to enclose the cache.
  env.GIT_CEILING_DIRECTORIES = cwd;
  const entries = Object.entries(config ?? {});
  env.GIT_CONFIG_COUNT = String(entries.length);
  entries.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return env;
}

/**
 * Runs `git <args>`; resolves with the outcome for any exit code, rejects only when git cannot start.
 * The process is started by this process's git runner (runner.ts), in its own process group, so a
 * timeout also kills git-remote-https, ssh and upload-pack children.
 */
export function runGit(args: readonly string[], options: GitRunOptions): Promise<GitRunResult> {
  return runInHelper({
    args,
    cwd: options.cwd,
    env: childEnv(options.cwd, options.config),
    timeoutMs: options.timeoutMs,
    maxOutputBytes: options.maxOutputBytes,
    ...(options.stdin ? { stdin: options.stdin } : {}),
  });
}

/** A counting semaphore: bounds how many git processes one service runs at once. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((wake) => this.waiting.push(wake));
    else this.active += 1;
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}

/**
 * Starts a long-running git service process (upload-pack, receive-pack) with the same scrubbed
 * environment as runGit, streams wired by the caller. Own process group, so `kill(-pid)` ends it.
 */
export function spawnGitService(
  args: readonly string[],
  options: { cwd: string; config?: Readonly<Record<string, string>> },
): ChildProcess {
  return spawn('git', args, {
    cwd: options.cwd,
    env: childEnv(options.cwd, options.config),
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
}
