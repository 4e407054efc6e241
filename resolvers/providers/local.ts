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
  clone: (
    repo: { url: string; credential: string | null },
    branch: string,
    dir: string,
    workspace: { originUrl: string; config: Record<string, string> },
  ) => Promise<unknown>;
  /**
   * Directory with the `singulacomp` CLI, put first on the sandbox's PATH (the image has it in
   * /usr/local/bin): the workspace's git credential helper runs it.
   */
  binDir?: string;
  /** How long stop() waits after SIGTERM before SIGKILL. @default 5_000 */
  stopGraceMs?: number;
  /** Variables from the host passed through (PATH is needed to find node and git). @default ['PATH','LANG','TZ'] */
  passEnv?: string[];
  hostEnv?: Record<string, string | undefined>;
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
      return null;
    }
  }

  async function state(id: string): Promise<SandboxState> {
    if (!existsSync(dirOf(id))) return 'DESTROYED';
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
    if (options.binDir) passed.PATH = [options.binDir, passed.PATH].filter(Boolean).join(':');
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
      return null;
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
      // origin is the API's git proxy and only SINGULACOMP_TOKEN is handed to it (R-GIT-1): the
      // upstream URL and its credential never enter the sandbox.
      const apiUrl = (request.env.SINGULACOMP_API_URL ?? '').replace(/\/+$/, '');
      await options.clone(
        { url: request.workspace.repositoryUrl, credential: request.workspace.credential ?? null },
        request.workspace.branch,
        join(dir, 'workspace'),
        {
          originUrl: `${apiUrl}/v1/git/${request.projectId}.git`,
          config: { [`credential.${apiUrl}.helper`]: '!singulacomp git-credential' },
        },
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
