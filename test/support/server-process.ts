// Real server processes for fleet tests: each on a free port picked here, ready once /healthz
// answers, killed on stop(). They run the server bundle `npm start` runs (dist/server.mjs, rebuilt
// by global setup when a source changed), which starts in half the CPU time of loading every source
// through tsx; a process started in another checkout (`cwd`) runs its sources through tsx. Also a
// throwaway redis-server on its own port, for tests that stop and restart Redis.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { freePort } from '../../contract/ports';
import { localRunDir } from '../../resolvers/providers/local';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAST_PATHS_ENV } from './env';
import { testRunEnv } from './test-run';
import { waitFor } from './wait';
import { collectOutput } from './child-output';

const ROOT = new URL('../..', import.meta.url).pathname;

/** The key every process of one test fleet shares (secrets at rest, sandbox-token signing). */
export const TEST_SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

export { freePort };

async function waitUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: () => string,
): Promise<void> {
  try {
    await waitFor(check, { timeoutMs, intervalMs: 100 });
  } catch (error) {
    throw new Error(`${what()} (${(error as Error).message})`);
  }
}

export interface ServerProcessOptions {
  databaseUrl?: string;
  redisUrl?: string;
  /** @default a fresh temporary directory, removed by stop() */
  dataDir?: string;
  /** Shared by every process of one fleet. @default TEST_SECRET_KEY */
  secretKey?: string;
  /** @default 'silent' */
  logLevel?: string;
  /** Extra environment (wins over the defaults). */
  env?: Record<string, string>;
  /** @default 60_000 */
  startTimeoutMs?: number;
  /** Start it as a user would, with `npm start` (in its own process group, stopped as a group). */
  npmStart?: boolean;
  /** The checkout to start in. @default this repository */
  cwd?: string;
  /** Listen on this port (a replica restarted in place) instead of a free one picked here. */
  port?: number;
}

export interface ServerProcess {
  process: ChildProcess;
  port: number;
  url: string;
  graphqlUrl: string;
  wsUrl: string;
  dataDir: string;
  /** stdout and stderr so far, for failure messages. */
  output(): string;
  /** The bootstrap admin token if this process created the admin, else null. */
  bootstrapToken(): string | null;
  /** GET /readyz as parsed JSON plus its status. */
  readyz(): Promise<{ status: number; body: Record<string, unknown> }>;
  /** SIGTERM, SIGKILL after timeoutMs; kills LOCAL sandboxes it left; resolves to the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
}

/** The child could not listen: another process took the port between our pick and its bind. */
class PortTakenError extends Error {}

/**
 * The port is picked here and bound by the child only after its migrations: another process (a
 * second suite on this machine) can take it in between. The child then exits with EADDRINUSE and is
 * started again on another port, in the same data directory (a bootstrap token it wrote stays).
 */
export async function startServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const ownDataDir = !options.dataDir;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'sc-proc-'));
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options, dataDir, ownDataDir);
    } catch (error) {
      if (error instanceof PortTakenError && attempt < 5 && options.port === undefined) continue;
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
      throw error;
    }
  }
}

async function startOnce(
  options: ServerProcessOptions,
  dataDir: string,
  ownDataDir: boolean,
): Promise<ServerProcess> {
  const port = options.port ?? (await freePort());
  const [command, args] = options.npmStart
    ? ['npm', ['start']]
    : options.cwd
      ? [process.execPath, ['--import', 'tsx', join(options.cwd, 'server/main.ts')]]
      : [process.execPath, [join(ROOT, 'dist/server.mjs')]];
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    detached: options.npmStart === true,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? tmpdir(),
      NODE_ENV: 'test',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: options.logLevel ?? 'silent',
      SINGULACOMP_DATA_DIR: dataDir,
      SINGULACOMP_LOCAL_ENTRY: 'exec sleep 600',
      SINGULACOMP_SECRET_KEY: options.secretKey ?? TEST_SECRET_KEY,
      ...testRunEnv(),
      // Admission's transaction limits (5 s by default) as backstops: on a starved machine a create
      // waited past them and answered 503, which is right for the product but not what these tests test.
      SINGULACOMP_TX_MAX_WAIT_MS: '60000',
      SINGULACOMP_TX_TIMEOUT_MS: '60000',
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
      ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
      ...FAST_PATHS_ENV,
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  try {
    // Until it answers or exits: a child that exited fails the start at once.
    await waitUntil(
      async () => child.exitCode !== null || (await fetch(`${url}/healthz`)).ok,
      options.startTimeoutMs ?? 60_000,
      () => `server on port ${port} did not become healthy (exit ${child.exitCode}):\n${output()}`,
    );
    if (child.exitCode !== null) {
      throw new Error(
        `server on port ${port} exited (${child.exitCode}) before it was healthy:\n${output()}`,
      );
    }
  } catch (error) {
    if (options.npmStart && child.pid) process.kill(-child.pid, 'SIGKILL');
    else child.kill('SIGKILL');
    await exited;
    if (/EADDRINUSE/.test(output())) throw new PortTakenError((error as Error).message);
    throw error;
  }
  return {
    process: child,
    port,
    url,
    graphqlUrl: `${url}/graphql`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    dataDir,
    output,
    bootstrapToken() {
      const file = join(dataDir, 'bootstrap-token');
      return existsSync(file) ? readFileSync(file, 'utf8').trim() : null;
    },
    async readyz() {
      const response = await fetch(`${url}/readyz`);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
    async stop(timeoutMs = 15_000) {
      if (child.exitCode === null && child.signalCode === null) {
        // npm start: the server is npm's child; signal the whole group.
        const signal = (name: NodeJS.Signals) =>
          options.npmStart && child.pid ? process.kill(-child.pid, name) : child.kill(name);
        signal('SIGTERM');
        const timer = setTimeout(() => {
          try {
            signal('SIGKILL');
          } catch {
            // already gone
          }
        }, timeoutMs);
        await exited;
        clearTimeout(timer);
      }
      killLocalSandboxes(dataDir);
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
      return child.exitCode;
    },
  };
}

export interface RedisProcess {
  port: number;
  url: string;
  /** Stops the server (SIGKILL: no save, connections drop as in a crash). */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is persisted). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** `redis-server --port <free> --save "" --appendonly no`, owned by the test. */
export async function startRedisProcess(): Promise<RedisProcess> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  const launch = async () => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--save', '', '--appendonly', 'no', '--bind', '127.0.0.1'],
      {
        stdio: 'ignore',
      },
    );
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    await waitUntil(
      () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.once('connect', () => {
            socket.end();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        }),
      10_000,
      () => `redis-server did not listen on ${port}`,
    );
  };
  const kill = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  await launch();
  return { port, url: `redis://127.0.0.1:${port}`, kill, restart: launch, stop: kill };
}

/**
 * Kills the process group of every LOCAL sandbox under `<dataDir>/sandboxes` (their entry
 * processes are detached, so they outlive the server that launched them). Returns how many.
 */
export function killLocalSandboxes(dataDir: string): number {
  const root = join(dataDir, 'sandboxes');
  if (!existsSync(root)) return 0;
  let killed = 0;
  for (const entry of readdirSync(root)) {
    const pidFile = join(root, entry, 'entry.pid');
    if (!existsSync(pidFile)) continue;
    const pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
    if (!Number.isFinite(pid) || pid <= 0) continue;
    try {
      process.kill(-pid, 'SIGKILL');
      killed++;
    } catch {
      // already gone
    }
  }
  // A sandbox launched just before its server was killed may not have written entry.pid yet:
  // find those by their working directory.
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue;
    }
    if (!cwd.startsWith(`${root}/`)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed++;
    } catch {
      // already gone
    }
  }
  // Nothing destroys these sandboxes: their socket directories, outside the data dir, go too.
  for (const entry of readdirSync(root))
    rmSync(localRunDir(join(root, entry)), { recursive: true, force: true });
  return killed;
}

/** POSTs a GraphQL request to any server URL; returns status, headers and the parsed body. */
export async function postGraphql(
  graphqlUrl: string,
  body: { query: string; variables?: unknown },
  token: string | null,
  headers: Record<string, string> = {},
): Promise<{
  status: number;
  headers: Headers;
  json: {
    data?: Record<string, unknown> | null;
    errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
  };
}> {
  const response = await fetch(graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let json: Awaited<ReturnType<typeof postGraphql>>['json'];
  try {
    json = JSON.parse(text);
  } catch {
    json = { errors: [{ message: text }] };
  }
  return { status: response.status, headers: response.headers, json };
}
