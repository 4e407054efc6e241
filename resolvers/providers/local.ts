// The LOCAL provider (R-SBX-2): a sandbox is a directory under the data dir and a process group on
// this host. The workspace is a clone of the session branch; the entry process gets the injected
// environment of R-SBX-3 and nothing else from the server's own environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { killByEnvironment } from './process-tree';
import type { CreateSandboxRequest, ProviderSandbox, SandboxProvider, SandboxState } from './types';

export interface LocalProviderOptions {
  /** Directory holding one folder per sandbox. */
  rootDir: string;
  /**
   * Entry command, run with /bin/sh -c in the workspace. Placeholders: {workspace}, {home},
   * {servicePort}, {opencodePort}. Default: the bundled daemon.
   */
  entryCommand: string;
  clone: (repo: { url: string; credential: string | null }, branch: string, dir: string) => Promise<unknown>;
  /** How long stop() waits after SIGTERM before SIGKILL. @default 5_000 */
  stopGraceMs?: number;
  /** Variables from the host passed through (PATH is needed to find node and git). @default ['PATH','LANG','TZ'] */
  passEnv?: string[];
  hostEnv?: Record<string, string | undefined>;
  /**
   * Where a launched sandbox's process identity is also recorded, so a server process with another
   * data dir on this host can find and stop it (the pid file is only under the launching one's).
   */
  identity?: LocalIdentityStore;
}

/** The entry process of a LOCAL sandbox: pid (= its process group) and start time in clock ticks. */
export interface LocalProcessIdentity {
  pid: number;
  startTicks: string;
  sessionId: string | null;
}

export interface LocalIdentityStore {
  save(providerSandboxId: string, identity: LocalProcessIdentity): Promise<void>;
  /** Null when unknown or recorded on another host. */
  load(providerSandboxId: string): Promise<LocalProcessIdentity | null>;
}

/** Start time of pid since boot in clock ticks (field 22 of /proc/<pid>/stat); null if gone. */
export async function processStartTicks(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** A TCP port on 127.0.0.1 that nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function createLocalProvider(options: LocalProviderOptions): SandboxProvider & {
  processOf(providerSandboxId: string): ChildProcess | undefined;
} {
  const children = new Map<string, ChildProcess>();
  const dirOf = (id: string) => join(options.rootDir, id.replace(/[^a-zA-Z0-9-]/g, ''));
  const pidFile = (id: string) => join(dirOf(id), 'entry.pid');
  const hostEnv = options.hostEnv ?? process.env;

  async function pidOf(id: string): Promise<number | null> {
    try {
      const pid = Number.parseInt(await readFile(pidFile(id), 'utf8'), 10);
      return Number.isFinite(pid) && pid > 0 ? pid : null;
    } catch {
      return recordedPid(id);
    }
  }

  /** The pid another server process recorded, if that very process (same start time) still runs. */
  async function recordedPid(id: string): Promise<number | null> {
    const identity = await options.identity?.load(id);
    if (!identity) return null;
    return (await processStartTicks(identity.pid)) === identity.startTicks ? identity.pid : null;
  }

  async function state(id: string): Promise<SandboxState> {
    if (!existsSync(dirOf(id))) return (await recordedPid(id)) ? 'STARTED' : 'DESTROYED';
    const pid = await pidOf(id);
    return pid && alive(pid) ? 'STARTED' : 'STOPPED';
  }

  async function launch(id: string): Promise<ProviderSandbox> {
    const dir = dirOf(id);
    const config = JSON.parse(await readFile(join(dir, 'sandbox.json'), 'utf8')) as {
      env: Record<string, string>;
      servicePort: number;
    };
    const opencodePort = await freePort();
    const workspace = join(dir, 'workspace');
    const home = join(dir, 'home');
    await mkdir(home, { recursive: true });
    const command = options.entryCommand
      .replaceAll('{workspace}', workspace)
      .replaceAll('{home}', home)
      .replaceAll('{servicePort}', String(config.servicePort))
      .replaceAll('{opencodePort}', String(opencodePort));
    const passed = Object.fromEntries(
      (options.passEnv ?? ['PATH', 'LANG', 'TZ']).flatMap((k) =>
        hostEnv[k] ? [[k, hostEnv[k] as string]] : [],
      ),
    );
    const log = createWriteStream(join(dir, 'entry.log'), { flags: 'a' });
    const child = spawn('/bin/sh', ['-c', command], {
      cwd: workspace,
      env: { ...passed, HOME: home, ...config.env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    children.set(id, child);
    child.once('exit', () => children.delete(id));
    await writeFile(pidFile(id), String(child.pid));
    const startTicks = child.pid ? await processStartTicks(child.pid) : null;
    if (child.pid && startTicks) {
      await options.identity?.save(id, {
        pid: child.pid,
        startTicks,
        sessionId: config.env.SINGULACOMP_SESSION_ID ?? null,
      });
    }
    return { providerSandboxId: id, state: 'STARTED', serviceUrl: `http://127.0.0.1:${config.servicePort}` };
  }

  async function stopProcess(id: string): Promise<void> {
    await stopGroup(id);
    // Whatever left the entry's process group (OpenCode) still carries the sandbox's session id.
    const sessionId = await sessionIdOf(id);
    if (sessionId) await killByEnvironment('SINGULACOMP_SESSION_ID', sessionId);
  }

  async function sessionIdOf(id: string): Promise<string | null> {
    try {
      const config = JSON.parse(await readFile(join(dirOf(id), 'sandbox.json'), 'utf8')) as {
        env?: Record<string, string>;
      };
      return config.env?.SINGULACOMP_SESSION_ID ?? null;
    } catch {
      return (await options.identity?.load(id))?.sessionId ?? null;
    }
  }

  async function stopGroup(id: string): Promise<void> {
    const pid = await pidOf(id);
    if (!pid || !alive(pid)) return;
    const signal = (sig: NodeJS.Signals) => {
      try {
        process.kill(-pid, sig);
      } catch {
        // already gone
      }
    };
    signal('SIGTERM');
    const deadline = Date.now() + (options.stopGraceMs ?? 5_000);
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (alive(pid)) signal('SIGKILL');
    // A child of this process only disappears from the table once reaped.
    const child = children.get(id);
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise((r) => child.once('exit', r));
    }
  }

  return {
    name: 'LOCAL',
    processOf: (id) => children.get(id),

    async create(request: CreateSandboxRequest) {
      const id = `local-${request.sandboxId}`;
      const dir = dirOf(id);
      await mkdir(dir, { recursive: true });
      await options.clone(
        { url: request.workspace.repositoryUrl, credential: request.workspace.credential ?? null },
        request.workspace.branch,
        join(dir, 'workspace'),
      );
      const servicePort = await freePort();
      const env = { ...request.env, SINGULACOMP_SERVICE_PORT: String(servicePort) };
      await writeFile(
        join(dir, 'sandbox.json'),
        JSON.stringify({ env, servicePort, labels: request.labels }),
        {
          mode: 0o600,
        },
      );
      return launch(id);
    },

    async start(id) {
      if ((await state(id)) === 'STARTED') {
        const config = JSON.parse(await readFile(join(dirOf(id), 'sandbox.json'), 'utf8')) as {
          servicePort: number;
        };
        return {
          providerSandboxId: id,
          state: 'STARTED',
          serviceUrl: `http://127.0.0.1:${config.servicePort}`,
        };
      }
      return launch(id);
    },

    async stop(id) {
      await stopProcess(id);
      return { providerSandboxId: id, state: await state(id), serviceUrl: null };
    },

    async destroy(id) {
      await stopProcess(id);
      await rm(dirOf(id), { recursive: true, force: true });
    },

    async keepAlive() {
      // Local sandboxes have no provider-side inactivity timer; the lease alone protects them.
    },

    status: state,
  };
}
