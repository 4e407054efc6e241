// Starts git processes from a small helper process instead of from the server itself. Node forks
// (libuv's spawn is fork + exec), and a fork costs in proportion to the forking process's memory:
// page tables are copied and every page is made copy-on-write, so the server pays again on its next
// writes. Measured per spawn of /bin/true: about 2 ms of CPU from a bare node process, 3.4 ms from a
// process running the app on PostgreSQL, and 10 ms once it has run the embedded PGlite database.
// The helper is a plain node process that stays small, so every git command costs the former.
import { type ChildProcess, spawn } from 'node:child_process';

export interface RunnerRequest {
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  maxOutputBytes: number;
  stdin?: Buffer;
}

export interface RunnerResult {
  exitCode: number | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
  outputTooLarge: boolean;
}

const STDERR_LIMIT_BYTES = 16 * 1024;

/**
 * The helper's program (CommonJS, run with `node -e`: the server bundle and the sources alike can
 * start it without a file of its own). Each message runs one git command in its own process group;
 * a timeout or output beyond the limit kills the group. It exits when the server goes away.
 */
const HELPER_SOURCE = `
const { spawn } = require('node:child_process');
const STDERR_LIMIT = ${STDERR_LIMIT_BYTES};
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  let done = false;
  const reply = (message) => {
    if (done) return;
    done = true;
    if (process.connected) process.send(message, () => {});
  };
  let child;
  try {
    child = spawn('git', m.args, {
      cwd: m.cwd,
      env: m.env,
      stdio: [m.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
    });
  } catch (error) {
    reply({ id: m.id, error: String((error && error.message) || error) });
    return;
  }
  if (m.stdin && child.stdin) {
    child.stdin.on('error', () => {});
    child.stdin.end(Buffer.from(m.stdin));
  }
  const stdout = [];
  let stdoutBytes = 0;
  let stderr = '';
  let timedOut = false;
  let outputTooLarge = false;
  const killGroup = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, m.timeoutMs);
  child.stdout.on('data', (chunk) => {
    if (outputTooLarge) return;
    stdoutBytes += chunk.length;
    if (stdoutBytes > m.maxOutputBytes) {
      outputTooLarge = true;
      killGroup();
      return;
    }
    stdout.push(chunk);
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    if (stderr.length < STDERR_LIMIT) stderr += chunk.slice(0, STDERR_LIMIT - stderr.length);
  });
  child.on('error', (error) => {
    clearTimeout(timer);
    reply({ id: m.id, error: error.message });
  });
  child.on('close', (exitCode) => {
    clearTimeout(timer);
    reply({ id: m.id, result: { exitCode, stdout: Buffer.concat(stdout), stderr, timedOut, outputTooLarge } });
  });
});
`;

interface Pending {
  resolve: (result: RunnerResult) => void;
  reject: (error: Error) => void;
}

type HelperMessage =
  | { id: number; result: Omit<RunnerResult, 'stdout'> & { stdout: Uint8Array } }
  | { id: number; error: string };

/**
 * One helper per process, started on first use and again after it died (its pending commands fail
 * with an error, as a git that cannot start does). It never keeps the server alive: its handle and
 * channel are unreferenced while no command is pending.
 */
class GitRunner {
  private helper: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  run(request: RunnerRequest): Promise<RunnerResult> {
    const helper = this.helper ?? this.start();
    const id = this.nextId++;
    return new Promise<RunnerResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) helper.channel?.ref();
      helper.send({ id, ...request }, (error) => {
        if (error) this.settle(id, { id, error: `git runner unreachable: ${error.message}` });
      });
    });
  }

  private start(): ChildProcess {
    const helper = spawn(process.execPath, ['-e', HELPER_SOURCE], {
      cwd: '/',
      env: {},
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      serialization: 'advanced',
    });
    helper.unref();
    helper.channel?.unref();
    helper.on('message', (message: HelperMessage) => this.settle(message.id, message));
    const gone = (reason: string) => {
      if (this.helper !== helper) return;
      this.helper = null;
      for (const id of [...this.pending.keys()]) this.settle(id, { id, error: reason });
    };
    helper.on('error', (error) => gone(`git runner failed: ${error.message}`));
    helper.on('exit', (code, signal) => gone(`git runner exited (${signal ?? code})`));
    this.helper = helper;
    return helper;
  }

  private settle(id: number, message: HelperMessage): void {
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.helper?.channel?.unref();
    if ('error' in message) {
      waiter.reject(new Error(message.error));
      return;
    }
    const { stdout, ...rest } = message.result;
    waiter.resolve({ ...rest, stdout: Buffer.from(stdout.buffer, stdout.byteOffset, stdout.byteLength) });
  }
}

const runner = new GitRunner();

/** Runs one git command through this process's helper; rejects only when git (or the helper) cannot start. */
export function runInHelper(request: RunnerRequest): Promise<RunnerResult> {
  return runner.run(request);
}
