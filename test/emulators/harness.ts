// Shared machinery of the provider emulators (test fixtures): an HTTP server on 127.0.0.1 with a
// request log and fault injection, and "sandboxes" that run their entry command as real local
// processes in their own process group and temp directory.
import { killByEnvironment } from '../../resolvers/providers/process-tree';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRunEnv } from '../support/test-run';

export interface RequestRecord {
  method: string;
  /** Path without the query string. */
  path: string;
  query: string;
  /** Epoch ms when the request arrived. */
  at: number;
  /** Time the emulator spent answering (including injected delays). */
  durationMs: number;
  status: number;
  /** The fault that answered it, if any. */
  fault?: FaultKind;
}

export type FaultKind = 'rate-limit' | 'server-error' | 'slow' | 'unauthorized' | 'reply';

export type Fault =
  | { kind: 'rate-limit'; retryAfterSeconds: number }
  | { kind: 'server-error'; status?: number }
  /** Waits `delayMs`, then answers normally (a client with a shorter deadline times out). */
  | { kind: 'slow'; delayMs: number }
  | { kind: 'unauthorized' }
  /** Answers with this status and JSON body (an answer of the real service the emulator has no state for). */
  | { kind: 'reply'; status: number; json: unknown };

export interface FaultOptions {
  /** How many matching requests the fault answers. @default 1 */
  times?: number;
  /** How many matching requests pass untouched before the fault answers. @default 0 */
  skip?: number;
  /** Send `Retry-After` with a rate-limit fault. @default true */
  retryAfterHeader?: boolean;
  /** Substring or pattern the request path must match. */
  path?: string | RegExp;
  method?: string;
}

interface ArmedFault {
  fault: Fault;
  remaining: number;
  skip: number;
  retryAfterHeader: boolean;
  path?: string | RegExp;
  method?: string;
}

export interface JsonRequest {
  method: string;
  path: string;
  url: URL;
  headers: IncomingMessage['headers'];
  body: Buffer;
  json<T = Record<string, unknown>>(): T;
  raw: IncomingMessage;
}

export type Reply =
  | { status: number; json?: unknown; headers?: Record<string, string> }
  /** The handler wrote the response itself (streams). */
  | { streamed: true; status: number };

export type Handler = (req: JsonRequest, res: ServerResponse) => Promise<Reply>;

/** Error bodies differ per provider; the SDKs parse them. */
export type ErrorBody = (status: number, message: string) => unknown;

export class EmulatorServer {
  readonly requests: RequestRecord[] = [];
  private readonly faults: ArmedFault[] = [];
  private server: Server | null = null;
  private baseUrl = '';

  constructor(
    private readonly handler: Handler,
    private readonly errorBody: ErrorBody,
  ) {}

  get url(): string {
    return this.baseUrl;
  }

  async listen(): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('emulator has no TCP address');
    this.baseUrl = `http://127.0.0.1:${address.port}`;
    return this.baseUrl;
  }

  /** Arms a fault for the next `times` requests matching `path`/`method`. */
  inject(fault: Fault, options: FaultOptions = {}): void {
    this.faults.push({
      fault,
      remaining: options.times ?? 1,
      skip: options.skip ?? 0,
      retryAfterHeader: options.retryAfterHeader ?? true,
      path: options.path,
      method: options.method,
    });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  /** Requests whose method and path match. */
  requestsTo(method: string, path: string | RegExp): RequestRecord[] {
    return this.requests.filter((r) => r.method === method && matches(r.path, path));
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private takeFault(method: string, path: string): ArmedFault | null {
    const index = this.faults.findIndex(
      (f) => f.remaining > 0 && (!f.method || f.method === method) && (!f.path || matches(path, f.path)),
    );
    if (index < 0) return null;
    const armed = this.faults[index] as ArmedFault;
    if (armed.skip > 0) {
      armed.skip -= 1;
      return null;
    }
    armed.remaining -= 1;
    if (armed.remaining <= 0) this.faults.splice(index, 1);
    return armed;
  }

  private async handle(raw: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = Date.now();
    const started = performance.now();
    const url = new URL(raw.url ?? '/', 'http://127.0.0.1');
    const method = raw.method ?? 'GET';
    const record: RequestRecord = {
      method,
      path: url.pathname,
      query: url.search,
      at,
      durationMs: 0,
      status: 0,
    };
    this.requests.push(record);
    const chunks: Buffer[] = [];
    for await (const chunk of raw) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const finish = (status: number) => {
      record.status = status;
      record.durationMs = performance.now() - started;
    };
    try {
      const armed = this.takeFault(method, url.pathname);
      if (armed) {
        record.fault = armed.fault.kind;
        const fault = armed.fault;
        if (fault.kind === 'slow') {
          await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
          if (raw.destroyed || res.destroyed) return finish(499);
        } else if (fault.kind === 'reply') {
          res.writeHead(fault.status, { 'content-type': 'application/json' }).end(JSON.stringify(fault.json));
          return finish(fault.status);
        } else {
          const status =
            fault.kind === 'rate-limit' ? 429 : fault.kind === 'unauthorized' ? 401 : (fault.status ?? 503);
          const headers: Record<string, string> = { 'content-type': 'application/json' };
          if (fault.kind === 'rate-limit' && armed.retryAfterHeader)
            headers['retry-after'] = String(fault.retryAfterSeconds);
          res
            .writeHead(status, headers)
            .end(JSON.stringify(this.errorBody(status, `injected ${fault.kind}`)));
          return finish(status);
        }
      }
      const request: JsonRequest = {
        method,
        path: url.pathname,
        url,
        headers: raw.headers,
        body,
        raw,
        json: <T>() => (body.length ? JSON.parse(body.toString('utf8')) : {}) as T,
      };
      const reply = await this.handler(request, res);
      if ('streamed' in reply) return finish(reply.status);
      const headers: Record<string, string> = { ...reply.headers };
      if (reply.json === undefined) {
        // An explicit empty body: clients only skip JSON parsing on 204 or Content-Length 0.
        if (reply.status !== 204) headers['content-length'] = '0';
        res.writeHead(reply.status, headers).end();
      } else {
        headers['content-type'] ??= 'application/json';
        res.writeHead(reply.status, headers).end(JSON.stringify(reply.json));
      }
      finish(reply.status);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!res.headersSent) {
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify(this.errorBody(500, message)));
      } else {
        res.end();
      }
      finish(500);
    }
  }
}

function matches(path: string, pattern: string | RegExp): boolean {
  return typeof pattern === 'string' ? path.includes(pattern) : pattern.test(path);
}

/** A free TCP port on 127.0.0.1 (the emulated container's service port). */
export { freePort } from '../../contract/ports';

export interface LaunchOptions {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
}

/** A real process in its own process group, so stop/kill reach everything it spawned. */
export class SandboxProcess {
  readonly child: ChildProcess;
  exitCode: number | null = null;
  readonly exited: Promise<number>;
  private stopped = false;
  private readonly sessionId: string | undefined;

  constructor(options: LaunchOptions) {
    this.sessionId = options.env.SINGULACOMP_SESSION_ID;
    this.child = spawn(options.file, options.args, {
      cwd: options.cwd,
      // Only the sandbox's own environment plus what a shell needs to find binaries.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: options.cwd, ...testRunEnv(), ...options.env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => options.onStdout?.(chunk));
    this.child.stderr?.on('data', (chunk: Buffer) => options.onStderr?.(chunk));
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 + 9 : 1);
        resolve(this.exitCode);
      });
      this.child.on('error', () => {
        this.exitCode = 127;
        resolve(127);
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exitCode === null && !this.stopped;
  }

  private signal(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // The group is already gone.
    }
  }

  pause(): void {
    this.signal('SIGSTOP');
  }

  resume(): void {
    this.signal('SIGCONT');
  }

  /** SIGTERM the group, SIGKILL it after `graceMs`. */
  async kill(graceMs = 2_000): Promise<void> {
    this.stopped = true;
    if (this.exitCode !== null) return;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    // Children that ignored SIGTERM die with the group; OpenCode, in a group of its own, by its env.
    this.signal('SIGKILL');
    if (this.sessionId) await killByEnvironment('SINGULACOMP_SESSION_ID', this.sessionId);
  }
}

/** Temp directory of one emulated sandbox (its "filesystem"). */
export function sandboxDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The stand-in daemon (an ES module): answers `GET /singulacomp/health` on SINGULACOMP_SERVICE_PORT
 * with its session id, pid and environment, and exits on SIGTERM.
 */
export const FAKE_DAEMON_SOURCE = `import { createServer } from 'node:http';
const port = Number(process.env.SINGULACOMP_SERVICE_PORT);
createServer((req, res) => {
  if (req.url !== '/singulacomp/health') { res.writeHead(404).end(); return; }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({
    ok: true,
    sessionId: process.env.SINGULACOMP_SESSION_ID ?? null,
    pid: process.pid,
    env: process.env,
  }));
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

/** Writes the stand-in daemon into `dir` and returns the entry command that starts it. */
export function fakeDaemonCommand(dir: string): string {
  const file = join(dir, 'fake-daemon.mjs');
  writeFileSync(file, FAKE_DAEMON_SOURCE);
  return `${JSON.stringify(process.execPath)} ${JSON.stringify(file)}`;
}

export interface DaemonHealth {
  ok: boolean;
  sessionId: string | null;
  pid: number;
  env: Record<string, string>;
}

/**
 * Polls the daemon's health route until it answers (the process needs a moment to listen), with
 * the provider's access headers (Daytona's preview token) when it needs them.
 */
export async function waitForHealth(
  serviceUrl: string,
  timeoutMs = 10_000,
  headers: Record<string, string> = {},
): Promise<DaemonHealth> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(`${serviceUrl}/singulacomp/health`, {
        headers,
        signal: AbortSignal.timeout(1_000),
      });
      if (response.ok) return (await response.json()) as DaemonHealth;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`no health answer from ${serviceUrl}`);
    await sleep(25);
  }
}

/**
 * True when the daemon answers at the URL within `timeoutMs`: a connection that is accepted and
 * not answered by a provider edge saying nothing listens (502).
 */
export async function answers(
  serviceUrl: string,
  timeoutMs = 500,
  headers: Record<string, string> = {},
): Promise<boolean> {
  try {
    const response = await fetch(`${serviceUrl}/singulacomp/health`, {
      headers,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel();
    return response.status !== 502;
  } catch {
    return false;
  }
}

/**
 * The HTTP status the daemon's health route answers with these headers (0: no connection);
 * redirects are not followed (Daytona's proxy sends a refused token to its sign-in page).
 */
export async function healthStatus(
  serviceUrl: string,
  headers: Record<string, string> = {},
): Promise<number> {
  try {
    const response = await fetch(`${serviceUrl}/singulacomp/health`, {
      headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(2_000),
    });
    await response.body?.cancel();
    return response.status;
  } catch {
    return 0;
  }
}
