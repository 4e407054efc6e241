// The LOCAL provider (R-SBX-2): a sandbox is a directory under the data dir and a process group on
// this host. The workspace is a clone of the session branch; the entry process gets the injected
// environment of R-SBX-3 and nothing else from the server's own environment. With bubblewrap
// (local-isolation.ts) the process group runs in namespaces of its own and sees only its workspace
// and home; without it a sandbox runs as the server's user and can read what the server can. A root
// server runs each isolated sandbox as an unprivileged uid of its own (local-uids.ts), which owns
// the sandbox's workspace and home.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { chmod, lchown, lstat, mkdir, open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { freePort } from '../../contract/ports';
import { dirname, join } from 'node:path';
import { ProviderValidationError } from './errors';
import {
  BRIDGE_GO,
  BRIDGE_SCRIPT,
  type HostBridges,
  SANDBOX_RUN_DIR,
  type SandboxIdentity,
  bwrapArgs,
  defaultReadOnlyPaths,
  openHostBridges,
  sandboxEtcEntries,
} from './local-isolation';
import type { LocalUidAllocator } from './local-uids';
import { killByEnvironment, pidsWithEnvironment } from './process-tree';
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
  /**
   * `bwrap`: namespaces and a private filesystem per sandbox. `none`: plain host processes; with
   * `refuse` set, launching is refused with that message (production without isolation).
   */
  isolation:
    | {
        mode: 'bwrap';
        dataDir: string;
        /** Paths bound read-only besides the system ones. @default defaultReadOnlyPaths() */
        readOnlyDirs?: string[];
        /** Where a root server takes each sandbox's uid from (R-ISO-2). Required when running as root. */
        uids?: LocalUidAllocator;
      }
    | { mode: 'none'; refuse?: string };
  /**
   * Given to the daemon as SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS: after this long without reaching
   * the API it stops itself, and the sandbox with it (the lease TTL: by then the lease is gone).
   */
  controlPlaneTimeoutMs?: number;
  /** Loopback port of this server's API, forwarded into isolated sandboxes. */
  apiPort?: () => number | null;
  /** Further host loopback ports isolated sandboxes may reach (e.g. a model endpoint). @default [] */
  egressPorts?: number[];
  /**
   * Where a launched sandbox's process identity is also recorded, so a server process with another
   * data dir on this host can find and stop it (the pid file is only under the launching one's).
   */
  identity?: LocalIdentityStore;
  /**
   * Told when an entry process this server launched exits, whatever ended it (our stop, a crash, a
   * kill from outside): the sandbox is then STOPPED. Entries launched by another server process
   * (or before a restart) are not watched.
   */
  onEntryExit?: (providerSandboxId: string, exit: EntryExit) => void;
}

/** How a LOCAL sandbox's entry process ended: its exit code, or the signal that killed it. */
export interface EntryExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Entry exits remembered per server process for entryExit(). */
const MAX_REMEMBERED_EXITS = 1_000;

/** "exited with code 3" or "was killed by SIGKILL": how a failure reason names an entry's end. */
export function describeEntryExit(exit: EntryExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code ?? 'unknown'}`;
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

/**
 * `chown -R` without a process per sandbox: every entry below `path` given to uid:gid, links
 * themselves and never what they point to (lchown, and only real directories are descended into).
 */
export async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid);
  if (!(await lstat(path)).isDirectory()) return;
  const entries = await readdir(path, { withFileTypes: true });
  await Promise.all(
    entries.map((entry) =>
      entry.isDirectory()
        ? chownTree(join(path, entry.name), uid, gid)
        : lchown(join(path, entry.name), uid, gid),
    ),
  );
}

/** A launch's result as the provider interface returns it (without its hold's controls). */
function strip({ providerSandboxId, state, serviceUrl }: ProviderSandbox): ProviderSandbox {
  return { providerSandboxId, state, serviceUrl };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The directory of a LOCAL sandbox's Unix sockets (named by its sandbox directory). The sockets live
 * in a short directory of their own: a socket path is limited to 107 bytes, which a data dir deep in
 * the filesystem would exceed under the sandbox directory. Removed when the sandbox is destroyed.
 */
export function localRunDir(sandboxDir: string): string {
  return join('/tmp', `sc-run-${createHash('sha256').update(sandboxDir).digest('hex').slice(0, 20)}`);
}

export function createLocalProvider(options: LocalProviderOptions): SandboxProvider & {
  processOf(providerSandboxId: string): ChildProcess | undefined;
  /** Reopens the host side of every running isolated sandbox (after this server restarted); returns failures. */
  reattach(): Promise<Array<{ id: string; error: unknown }>>;
} {
  const children = new Map<string, ChildProcess>();
  /** How entries this process launched ended, newest last (entryExit). */
  const exits = new Map<string, EntryExit>();
  const bridges = new Map<string, HostBridges>();
  const isolation = options.isolation;
  const dirOf = (id: string) => join(options.rootDir, id.replace(/[^a-zA-Z0-9-]/g, ''));
  const pidFile = (id: string) => join(dirOf(id), 'entry.pid');
  const runDirOf = (id: string) => localRunDir(dirOf(id));
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

  interface SandboxConfig {
    env: Record<string, string>;
    servicePort: number;
    /** Port the API answers on inside an isolated sandbox (fixed at creation, survives restarts). */
    apiPortInside?: number;
    /** Host uid/gid of an isolated sandbox of a root server. */
    identity?: SandboxIdentity;
  }

  const readConfig = async (id: string) =>
    JSON.parse(await readFile(join(dirOf(id), 'sandbox.json'), 'utf8')) as SandboxConfig;

  /** The host half of an isolated sandbox's network, (re)opened by whichever process runs it now. */
  async function ensureBridges(id: string, config: SandboxConfig): Promise<void> {
    if (isolation.mode !== 'bwrap' || bridges.has(id)) return;
    const egress = new Map<number, number>();
    const apiPort = options.apiPort?.() ?? null;
    if (config.apiPortInside && apiPort) egress.set(config.apiPortInside, apiPort);
    for (const port of options.egressPorts ?? []) egress.set(port, port);
    bridges.set(
      id,
      await openHostBridges({
        runDir: runDirOf(id),
        egress,
        servicePort: config.servicePort,
        owner: config.identity ?? null,
      }),
    );
  }

  async function closeBridges(id: string): Promise<void> {
    const open = bridges.get(id);
    bridges.delete(id);
    await open?.close();
  }

  /**
   * The uid an isolated sandbox of a root server runs as: claimed once (at creation, or at the first
   * launch of a sandbox created before uids were) and kept in sandbox.json. Its home is given to it
   * here; its workspace by giveTree, once the clone is in it.
   */
  async function claimIdentity(id: string, config: SandboxConfig): Promise<SandboxIdentity | null> {
    if (isolation.mode !== 'bwrap' || process.getuid?.() !== 0) return null;
    if (config.identity) return config.identity;
    if (!isolation.uids) throw new Error('a root server needs a uid range for isolated LOCAL sandboxes');
    const identity = await isolation.uids.claim(dirOf(id));
    const dir = dirOf(id);
    await mkdir(join(dir, 'home'), { recursive: true });
    await giveTree(join(dir, 'home'), identity);
    config.identity = identity;
    await writeFile(join(dir, 'sandbox.json'), JSON.stringify(config), { mode: 0o600 });
    return identity;
  }

  async function giveTree(path: string, identity: SandboxIdentity): Promise<void> {
    await chownTree(path, identity.uid, identity.gid);
    await chmod(path, 0o700);
  }

  /** claimIdentity for a sandbox whose workspace is already cloned (one created before uids were). */
  async function identityOf(id: string, config: SandboxConfig): Promise<SandboxIdentity | null> {
    if (config.identity) return config.identity;
    const identity = await claimIdentity(id, config);
    if (identity) await giveTree(join(dirOf(id), 'workspace'), identity);
    return identity;
  }

  /**
   * Starts the sandbox's entry. `held` (isolated sandboxes only): bubblewrap and the bridge start, but
   * the bridge runs the entry only once `release` is called (its stdin says go), and exits without
   * running it on `abort` (stdin ends) or when this process dies. create() starts a sandbox so while
   * its workspace is cloned: the two processes' starts no longer wait for the clone.
   */
  async function launch(
    id: string,
    held = false,
  ): Promise<ProviderSandbox & { release(): void; abort(): void }> {
    if (isolation.mode === 'none' && isolation.refuse) {
      throw new ProviderValidationError(isolation.refuse, { provider: 'LOCAL', operation: 'create' });
    }
    const dir = dirOf(id);
    const config = await readConfig(id);
    const identity = await identityOf(id, config);
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
    // Delivered variables first, then the host's and the sandbox's own, then the platform's:
    // a delivered PATH or HOME never replaces ours, and nothing overrides SINGULACOMP_*.
    const platform = Object.fromEntries(
      Object.entries(config.env).filter(([k]) => k.startsWith('SINGULACOMP_')),
    );
    const env: Record<string, string> = { ...config.env, ...passed, HOME: home, ...platform };
    if (options.controlPlaneTimeoutMs)
      env.SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS = String(options.controlPlaneTimeoutMs);
    // The CLI shim (singulacomp, its git credential helper) comes first on the sandbox's PATH.
    if (options.binDir) env.PATH = [options.binDir, env.PATH].filter(Boolean).join(':');
    let file = '/bin/sh';
    let args = ['-c', command];
    if (isolation.mode === 'bwrap') {
      await ensureBridges(id, config);
      if (config.apiPortInside) env.SINGULACOMP_API_URL = `http://127.0.0.1:${config.apiPortInside}`;
      // Only system directories and this Node are visible inside: the server's own Node comes first.
      env.PATH = [dirname(process.execPath), ...(env.PATH ?? '/usr/bin:/bin').split(':')].join(':');
      const runDir = runDirOf(id);
      // The sandbox's uid has a name inside (tools that look themselves up in /etc/passwd).
      let etc: { passwd: string; group: string } | undefined;
      if (identity) {
        const lines = sandboxEtcEntries(identity, home);
        etc = { passwd: join(runDir, 'passwd'), group: join(runDir, 'group') };
        for (const name of ['passwd', 'group'] as const) {
          const host = await readFile(join('/etc', name), 'utf8').catch(() => '');
          await writeFile(etc[name], `${host}${host.endsWith('\n') || !host ? '' : '\n'}${lines[name]}`, {
            mode: 0o644,
          });
        }
      }
      const spec = {
        runDir: SANDBOX_RUN_DIR,
        egressPorts: [
          ...new Set([
            ...(config.apiPortInside ? [config.apiPortInside] : []),
            ...(options.egressPorts ?? []),
          ]),
        ],
        servicePort: config.servicePort,
        held,
      };
      file = 'bwrap';
      args = [
        ...bwrapArgs({
          workspace,
          home,
          runDir,
          dataDir: isolation.dataDir,
          readOnly: isolation.readOnlyDirs ?? defaultReadOnlyPaths(),
          ...(options.binDir ? { visibleInDataDir: [options.binDir] } : {}),
          identity,
          ...(etc ? { etc } : {}),
        }),
        '--',
        process.execPath,
        BRIDGE_SCRIPT,
        JSON.stringify(spec),
        '/bin/sh',
        '-c',
        command,
      ];
    }
    const log = createWriteStream(join(dir, 'entry.log'), { flags: 'a' });
    const hold = held && isolation.mode === 'bwrap';
    const child = spawn(file, args, {
      cwd: workspace,
      env,
      detached: true,
      stdio: [hold ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    // A bridge gone before its go (it failed, or was stopped) closes the pipe under the write.
    child.stdin?.on('error', () => {});
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (error) {
      await closeBridges(id);
      throw error;
    }
    children.set(id, child);
    child.once('exit', (code, signal) => {
      children.delete(id);
      exits.delete(id);
      exits.set(id, { code, signal });
      // Only the recent ones: a status check reads it right after the exit.
      if (exits.size > MAX_REMEMBERED_EXITS) exits.delete(exits.keys().next().value!);
      closeBridges(id).catch(() => {});
      options.onEntryExit?.(id, { code, signal });
    });
    await writeFile(pidFile(id), String(child.pid));
    const startTicks = child.pid ? await processStartTicks(child.pid) : null;
    if (child.pid && startTicks) {
      await options.identity?.save(id, {
        pid: child.pid,
        startTicks,
        sessionId: config.env.SINGULACOMP_SESSION_ID ?? null,
      });
    }
    return {
      providerSandboxId: id,
      state: 'STARTED',
      serviceUrl: `http://127.0.0.1:${config.servicePort}`,
      release: () => child.stdin?.end(`${BRIDGE_GO}\n`),
      abort: () => child.stdin?.end(),
    };
  }

  async function stopProcess(id: string): Promise<void> {
    await stopGroup(id);
    await closeBridges(id);
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

  /**
   * The process group SIGTERM goes to. An isolated sandbox runs in a session of its own, started
   * inside it by the bridge: that group (bridge, entrypoint, daemon) is signalled, and the bubblewrap
   * processes around it end once it has. Otherwise the entry's own group.
   */
  async function termGroupOf(id: string, pid: number): Promise<number> {
    if (isolation.mode !== 'bwrap') return pid;
    const sessionId = await sessionIdOf(id);
    if (!sessionId) return pid;
    for (const candidate of await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)) {
      try {
        const stat = await readFile(`/proc/${candidate}/stat`, 'utf8');
        const session = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
        // The bridge is `node <bridge script> …`; the bubblewrap processes name it further on.
        const argv = (await readFile(`/proc/${candidate}/cmdline`, 'utf8')).split('\0');
        if (session === candidate && candidate !== pid && argv[1] === BRIDGE_SCRIPT) return candidate;
      } catch {
        // gone meanwhile
      }
    }
    return pid;
  }

  async function stopGroup(id: string): Promise<void> {
    const pid = await pidOf(id);
    if (!pid || !alive(pid)) return;
    const signal = (group: number, sig: NodeJS.Signals) => {
      try {
        process.kill(-group, sig);
      } catch {
        // already gone
      }
    };
    signal(await termGroupOf(id, pid), 'SIGTERM');
    const deadline = Date.now() + (options.stopGraceMs ?? 5_000);
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // The outer bubblewrap's group: its PID namespace, with everything in it, ends with it.
    if (alive(pid)) signal(pid, 'SIGKILL');
    // A child of this process only disappears from the table once reaped.
    const child = children.get(id);
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise((r) => child.once('exit', r));
    }
  }

  return {
    name: 'LOCAL',
    processOf: (id) => children.get(id),
    entryExit: (id) => exits.get(id) ?? null,
    // Host processes: the template's memory and cpu are reported, not enforced.
    limitsEnforced: { memory: false, cpu: false },

    async logTail(id, maxBytes) {
      const file = await open(join(dirOf(id), 'entry.log'), 'r').catch(() => null);
      if (!file) return null;
      try {
        const { size } = await file.stat();
        const length = Math.min(size, maxBytes);
        const buffer = Buffer.alloc(length);
        await file.read(buffer, 0, length, size - length);
        return buffer.toString('utf8');
      } finally {
        await file.close();
      }
    },

    async reattach() {
      const failures: Array<{ id: string; error: unknown }> = [];
      if (isolation.mode !== 'bwrap') return failures;
      const ids = await readdir(options.rootDir).catch(() => [] as string[]);
      for (const id of ids) {
        if ((await state(id)) !== 'STARTED') continue;
        await ensureBridges(id, await readConfig(id)).catch((error: unknown) => failures.push({ id, error }));
      }
      return failures;
    },

    async create(request: CreateSandboxRequest) {
      const id = `local-${request.sandboxId}`;
      const dir = dirOf(id);
      await mkdir(dir, { recursive: true });
      // origin is the API's git proxy and only SINGULACOMP_TOKEN is handed to it (R-GIT-1): the
      // upstream URL and its credential never enter the sandbox.
      const apiUrl = (request.env.SINGULACOMP_API_URL ?? '').replace(/\/+$/, '');
      const clone = () =>
        options.clone(
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
      const apiPortInside = isolation.mode === 'bwrap' ? (options.apiPort?.() ?? undefined) : undefined;
      const config = { env, servicePort, apiPortInside, labels: request.labels };
      await writeFile(join(dir, 'sandbox.json'), JSON.stringify(config), { mode: 0o600 });
      const identity = await claimIdentity(id, config);
      const workspace = join(dir, 'workspace');
      // Unisolated, the entry is the sandbox's first process: nothing can start before the clone.
      if (isolation.mode !== 'bwrap') {
        await clone();
        return strip(await launch(id));
      }
      // An empty directory for bubblewrap to bind; the clone fills it. Until the tree is given to the
      // sandbox's uid it stays root's, and only the bridge (no code of the sandbox's) runs inside.
      await mkdir(workspace, { recursive: true });
      const starting = launch(id, true);
      starting.catch(() => {}); // awaited below, once the clone has settled
      try {
        await clone();
        if (identity) await giveTree(workspace, identity);
      } catch (error) {
        const started = await starting.catch(() => null);
        if (started) {
          started.abort();
          await stopGroup(id);
          await closeBridges(id);
        }
        throw error;
      }
      const started = await starting;
      started.release();
      return strip(started);
    },

    async start(id) {
      if ((await state(id)) === 'STARTED') {
        const config = await readConfig(id);
        await ensureBridges(id, config);
        return {
          providerSandboxId: id,
          state: 'STARTED',
          serviceUrl: `http://127.0.0.1:${config.servicePort}`,
        };
      }
      return strip(await launch(id));
    },

    async stop(id) {
      await stopProcess(id);
      return { providerSandboxId: id, state: await state(id), serviceUrl: null };
    },

    async destroy(id) {
      await stopProcess(id);
      const identity = await readConfig(id)
        .then((config) => config.identity)
        .catch(() => undefined);
      if (identity && isolation.mode === 'bwrap') await isolation.uids?.release(identity.uid, dirOf(id));
      await rm(dirOf(id), { recursive: true, force: true });
      await rm(runDirOf(id), { recursive: true, force: true });
    },

    async keepAlive() {
      // Local sandboxes have no provider-side inactivity timer; the lease alone protects them.
    },

    status: state,
  };
}
