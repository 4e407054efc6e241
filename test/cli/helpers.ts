// Drives the real `singulacomp` CLI (the shim the server installs for LOCAL sandboxes): as a child
// process for scripts, and inside a tmux pane (a real pseudo-terminal) for prompts and spinners.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../support/wait';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function cliPath(dataDir: string): string {
  return join(dataDir, 'bin', 'singulacomp');
}

/** Runs the CLI with exactly `env` (plus PATH), stdin closed. */
export function runCli(dataDir: string, args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      cliPath(dataDir),
      args,
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 180_000 },
      (error, stdout, stderr) => {
        const code = error ? ((error as { code?: number }).code ?? 1) : 0;
        resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/**
 * A tmux pane running one command; its exit code is printed as `EXIT=<n>` when it ends (and written
 * to a file, which exitCode polls: each screen capture starts a tmux client, a fork of the test
 * worker that costs in proportion to its memory).
 */
export interface Pane {
  text(): string;
  waitForText(pattern: RegExp, timeoutMs?: number): Promise<string>;
  send(...keys: string[]): void;
  /** The command's exit code, once it ended. */
  exitCode(timeoutMs?: number): Promise<number>;
  /** Every distinct screen seen by waitForText/exitCode polls, in order. */
  frames: string[];
  kill(): void;
}

export function startPane(command: string[], env: Record<string, string>): Pane {
  const dir = mkdtempSync(join(tmpdir(), 'sc-pane-'));
  const socket = `sc-cli-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const script = join(dir, 'run.sh');
  const exitFile = join(dir, 'exit');
  const quote = (value: string) => `'${value.replaceAll("'", "'\\''")}'`;
  writeFileSync(
    script,
    [
      ...Object.entries({ PATH: process.env.PATH ?? '', TERM: 'xterm-256color', ...env }).map(
        ([key, value]) => `export ${key}=${quote(value)}`,
      ),
      `${command.map(quote).join(' ')}`,
      'code=$?',
      'echo "EXIT=$code"',
      `echo "$code" > ${quote(exitFile)}`,
      'sleep 600',
    ].join('\n'),
  );
  execFileSync('tmux', [
    '-L',
    socket,
    '-f',
    '/dev/null',
    'new-session',
    '-d',
    '-s',
    'cli',
    '-x',
    '160',
    '-y',
    '50',
    `sh ${script}`,
  ]);
  const frames: string[] = [];
  const text = () => {
    const screen = execFileSync('tmux', ['-L', socket, 'capture-pane', '-p', '-t', 'cli'], {
      encoding: 'utf8',
    });
    if (frames.at(-1) !== screen) frames.push(screen);
    return screen;
  };
  return {
    frames,
    text,
    waitForText: (pattern, timeoutMs = 60_000) =>
      waitFor(
        async () => {
          const screen = text();
          return pattern.test(screen) ? screen : null;
        },
        { timeoutMs, intervalMs: 25 },
      ),
    send: (...keys) => execFileSync('tmux', ['-L', socket, 'send-keys', '-t', 'cli', ...keys]),
    async exitCode(timeoutMs = 120_000) {
      await waitFor(() => existsSync(exitFile) && readFileSync(exitFile, 'utf8').endsWith('\n'), {
        timeoutMs,
        intervalMs: 25,
      });
      // The file follows the EXIT line, which tmux may still be drawing: once the screen shows it,
      // the screen holds all the command printed.
      await waitFor(() => /EXIT=\d+/.test(text()), { timeoutMs: 30_000, intervalMs: 25 });
      return Number(readFileSync(exitFile, 'utf8'));
    },
    kill: () => {
      try {
        execFileSync('tmux', ['-L', socket, 'kill-server']);
      } catch {
        // already gone
      }
    },
  };
}
