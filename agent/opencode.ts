// The OpenCode runtime: resolving the binary, one `opencode serve` process, and its HTTP API.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { sleep } from '../contract/clock';
import { request } from './http';
import type { Logger } from './logger';

/**
 * Finds the real OpenCode binary. npm may skip `opencode-ai`'s install script, leaving its
 * `bin/opencode` shim unusable, so resolve the platform package `opencode-<platform>-<arch>[-baseline]`
 * directly, then fall back to `opencode` on PATH.
 */
export function resolveOpencodeBin(override?: string): string {
  if (override) return override;
  const require = createRequire(import.meta.url);
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const exe = process.platform === 'win32' ? 'opencode.exe' : 'opencode';
  for (const name of [
    `opencode-${platform}-${process.arch}`,
    `opencode-${platform}-${process.arch}-baseline`,
  ]) {
    try {
      const bin = join(dirname(require.resolve(`${name}/package.json`)), 'bin', exe);
      if (existsSync(bin)) return bin;
    } catch {
      // not installed for this platform; try the next candidate
    }
  }
  return 'opencode';
}

export type OpencodeSessionStatus =
  | { type: 'idle' }
  | { type: 'busy' }
  | { type: 'retry'; attempt?: number; message?: string; next?: number };

/** Thin client for the OpenCode server endpoints the daemon uses. */
export class OpencodeClient {
  constructor(
    readonly baseUrl: string,
    private readonly timeoutMs = 10_000,
  ) {}

  private async request(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = this.timeoutMs,
    signal?: AbortSignal,
  ): Promise<unknown> {
    const deadline = AbortSignal.timeout(timeoutMs);
    const response = await request(`${this.baseUrl}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ? AbortSignal.any([deadline, signal]) : deadline,
    });
    const text = await response.text();
    if (!response.ok)
      throw new Error(`opencode ${method} ${path}: HTTP ${response.status} ${text.slice(0, 200)}`);
    return text ? JSON.parse(text) : null;
  }

  /**
   * GET /global/health → `{ healthy, version }`. A request made while OpenCode boots can hang (see
   * OpencodeProcess.waitHealthy), hence the short timeout and the optional `signal` to drop it.
   */
  async health(timeoutMs = 2_000, signal?: AbortSignal): Promise<{ healthy: boolean; version?: string }> {
    return (await this.request('GET', '/global/health', undefined, timeoutMs, signal)) as {
      healthy: boolean;
      version?: string;
    };
  }

  async createSession(title?: string): Promise<{ id: string }> {
    return (await this.request('POST', '/session', title ? { title } : {})) as { id: string };
  }

  /** POST /session/:id/prompt_async: starts a turn and answers 204 at once. */
  async promptAsync(sessionId: string, text: string, extra: Record<string, unknown> = {}): Promise<void> {
    await this.request('POST', `/session/${encodeURIComponent(sessionId)}/prompt_async`, {
      ...extra,
      parts: [{ type: 'text', text }],
    });
  }

  /** GET /session: every OpenCode session, with `time.updated`. */
  async listSessions(): Promise<Array<{ id: string; time?: { created?: number; updated?: number } }>> {
    return (await this.request('GET', '/session')) as Array<{ id: string; time?: { updated?: number } }>;
  }

  /** GET /session/:id/message: the transcript, `[{ info, parts }]` oldest first. */
  async messages(sessionId: string): Promise<unknown[]> {
    return (await this.request('GET', `/session/${encodeURIComponent(sessionId)}/message`)) as unknown[];
  }

  async abort(sessionId: string): Promise<boolean> {
    return (await this.request('POST', `/session/${encodeURIComponent(sessionId)}/abort`)) === true;
  }

  /** GET /session/status: sessions that are not idle, keyed by OpenCode session id. */
  async sessionStatus(): Promise<Record<string, OpencodeSessionStatus>> {
    return (await this.request('GET', '/session/status')) as Record<string, OpencodeSessionStatus>;
  }

  async config(): Promise<Record<string, unknown>> {
    return (await this.request('GET', '/config')) as Record<string, unknown>;
  }

  /** POST /instance/dispose: OpenCode drops its instance state and re-reads config on the next request. */
  async disposeInstance(): Promise<void> {
    await this.request('POST', '/instance/dispose');
  }
}

export interface OpencodeProcessOptions {
  bin: string;
  port: number;
  workspace: string;
  home: string;
  configDir: string;
  /** Extra environment (on top of the daemon's own). */
  env?: Record<string, string>;
  logger: Logger;
  /** How long one health request may go unanswered before the next is sent. @default 2000 */
  healthRequestTimeoutMs?: number;
}

/** One `opencode serve` child, in its own process group so its tools die with it. */
export class OpencodeProcess {
  readonly child: ChildProcess;
  readonly client: OpencodeClient;
  readonly port: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private readonly log: Logger;
  private readonly healthRequestTimeoutMs: number;
  /**
   * Aborted at the child's next output or exit, then replaced: a health poll waiting out its
   * interval wakes then, since OpenCode prints its "listening" line the moment it can answer.
   */
  private output = new AbortController();

  constructor(options: OpencodeProcessOptions) {
    this.port = options.port;
    this.healthRequestTimeoutMs = options.healthRequestTimeoutMs ?? 2_000;
    this.log = options.logger.child({ module: 'opencode', port: options.port });
    this.client = new OpencodeClient(`http://127.0.0.1:${options.port}`);
    this.child = spawn(options.bin, ['serve', '--port', String(options.port), '--hostname', '127.0.0.1'], {
      cwd: options.workspace,
      env: {
        ...process.env,
        ...options.env,
        HOME: options.home,
        OPENCODE_CONFIG_DIR: options.configDir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const tail: string[] = [];
    const keep = (chunk: Buffer): void => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        this.log.debug({ line }, 'opencode output');
      }
      this.wake();
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.log.error({ err: error.message }, 'opencode failed to spawn');
        this.exitInfo = { code: -1, signal: null };
        resolve(this.exitInfo);
      });
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        this.wake();
        if (code !== 0 && signal === null) this.log.warn({ code, tail: tail.slice(-5) }, 'opencode exited');
        resolve(this.exitInfo);
      });
    });
  }

  private wake(): void {
    this.output.abort();
    this.output = new AbortController();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.exitInfo === null;
  }

  /**
   * Polls GET /global/health until healthy, every `pollMs` and whenever OpenCode writes output;
   * throws on timeout or if the process exits first.
   *
   * OpenCode opens its port before it serves: a request that connects in between (after its
   * first line, before "listening") is never answered. Its output therefore also drops the
   * request in flight, and the next one goes out at once instead of after the request timeout.
   */
  async waitHealthy(timeoutMs: number, pollMs = 200, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastError = 'not started';
    while (Date.now() < deadline) {
      if (!this.alive)
        throw new Error(`opencode exited before becoming healthy (code ${this.exitInfo?.code})`);
      if (signal?.aborted) throw new Error('aborted');
      // Taken before the check: output arriving while it runs drops the request and ends the pause.
      const output = this.output.signal;
      try {
        const health = await this.client.health(
          Math.min(this.healthRequestTimeoutMs, Math.max(200, deadline - Date.now())),
          output,
        );
        if (health.healthy) return;
        lastError = 'reported unhealthy';
      } catch (error) {
        lastError = error instanceof Error ? error.message : String(error);
      }
      await sleep(pollMs, signal ? AbortSignal.any([signal, output]) : output);
    }
    throw new Error(`opencode did not become healthy within ${timeoutMs} ms (${lastError})`);
  }

  /** SIGTERM to the process group, then SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.alive) return;
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    // tools OpenCode started may outlive it in the group
    this.signal('SIGKILL');
  }

  signal(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      try {
        process.kill(pid, signal);
      } catch {
        // already gone
      }
    }
  }
}
