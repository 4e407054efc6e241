// Isolation of LOCAL sandboxes with bubblewrap. A sandbox gets its own user, PID, IPC, UTS, cgroup
// and network namespaces; its filesystem is read-only system directories, the Node runtime and the
// application (for the bundled daemon and OpenCode), a private /tmp, and read-write only its own
// workspace and home. The data dir (database files, keys, the bootstrap token, other sandboxes) is
// covered by an empty tmpfs even when it lies inside a bound directory.
//
// Network: the sandbox's namespace has loopback only, so PostgreSQL, Redis and every other
// host-local service are out of reach by construction. What it may reach (the API, plus ports an
// operator lists, e.g. a model endpoint) is forwarded over Unix sockets the server listens on in
// the sandbox's run dir (see local-bridge.ts); the daemon's service port comes back the same way.
// Unix sockets cross network namespaces and need no privileges, so this works for a root and a
// rootless server alike, unlike veth pairs (root, plus firewall rules to keep the host's other
// loopback services out).
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';

export type LocalIsolationMode = 'bwrap' | 'none';

/** Where the run dir of a sandbox appears inside it. */
export const SANDBOX_RUN_DIR = '/run/singulacomp';

/** System directories bound read-only. /etc is bound file by file: it holds host secrets (shadow, keys). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
const ETC_ENTRIES = [
  'passwd',
  'group',
  'hosts',
  'hostname',
  'nsswitch.conf',
  'resolv.conf',
  'localtime',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'alternatives',
  'gitconfig',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'mime.types',
  'os-release',
  'debian_version',
  'profile',
  'bash.bashrc',
  'inputrc',
  'npmrc',
];

const bwrapProbes = new Map<string, boolean>();

/**
 * True when bubblewrap can create every namespace a sandbox needs on this host. Probed once per
 * binary and process: the answer is a property of the host, and the probe blocks while it runs.
 */
export function bwrapAvailable(bin = 'bwrap'): boolean {
  let available = bwrapProbes.get(bin);
  if (available === undefined) {
    const probe = spawnSync(bin, ['--unshare-all', '--ro-bind', '/', '/', '--proc', '/proc', 'true'], {
      stdio: 'ignore',
      timeout: 10_000,
    });
    available = probe.status === 0;
    bwrapProbes.set(bin, available);
  }
  return available;
}

export interface BwrapArgsOptions {
  workspace: string;
  home: string;
  runDir: string;
  dataDir: string;
  /** Directories bound read-only besides the system ones (the Node runtime, the application). */
  readOnly: string[];
  /** Directories inside the data dir that stay visible, read-only (e.g. the CLI shim's bin). */
  visibleInDataDir?: string[];
}

/** bubblewrap arguments up to (not including) the command. */
export function bwrapArgs(options: BwrapArgsOptions): string[] {
  const args = ['--unshare-all', '--hostname', 'sandbox', '--proc', '/proc', '--dev', '/dev'];
  // Mounted in this order so later ones cover earlier ones. A private /tmp first: the application
  // and its Node runtime may live below /tmp (a checkout in /tmp), and their read-only binds must
  // stay visible over it.
  args.push('--tmpfs', '/tmp');
  for (const dir of SYSTEM_DIRS) args.push('--ro-bind-try', dir, dir);
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', join('/etc', entry), join('/etc', entry));
  for (const dir of options.readOnly) args.push('--ro-bind', dir, dir);
  // The data dir may sit inside the application directory (./.data) or /tmp; either way it is
  // empty inside.
  args.push('--tmpfs', resolve(options.dataDir));
  // Read-only binds that must stay visible over the empty data dir (the CLI shim in <dataDir>/bin).
  for (const dir of options.visibleInDataDir ?? []) args.push('--ro-bind', dir, dir);
  args.push('--bind', options.workspace, options.workspace, '--bind', options.home, options.home);
  args.push('--ro-bind', join(options.runDir, 'egress'), join(SANDBOX_RUN_DIR, 'egress'));
  args.push('--bind', join(options.runDir, 'ingress'), join(SANDBOX_RUN_DIR, 'ingress'));
  args.push('--chdir', options.workspace);
  return args;
}

function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
}

function listen(server: Server, target: number | string, host?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (typeof target === 'number') server.listen(target, host, () => resolve());
    else server.listen(target, () => resolve());
  });
}

export interface HostBridges {
  close(): Promise<void>;
}

export interface HostBridgeOptions {
  runDir: string;
  /** Port inside the sandbox → port on the host's loopback it reaches. */
  egress: Map<number, number>;
  servicePort: number;
}

/**
 * The host's half of a sandbox's network: one Unix socket per egress port (the sandbox connects,
 * the host dials its own loopback) and a loopback listener on the service port that dials the
 * sandbox's ingress socket. Recreated when a server restarts under running sandboxes.
 */
export async function openHostBridges(options: HostBridgeOptions): Promise<HostBridges> {
  const servers: Server[] = [];
  const egressDir = join(options.runDir, 'egress');
  mkdirSync(egressDir, { recursive: true });
  mkdirSync(join(options.runDir, 'ingress'), { recursive: true });
  try {
    for (const [inside, hostPort] of options.egress) {
      const path = join(egressDir, `${inside}.sock`);
      rmSync(path, { force: true });
      const server = createServer((client) => pipeBoth(client, connect(hostPort, '127.0.0.1')));
      servers.push(server);
      await listen(server, path);
    }
    const ingressPath = join(options.runDir, 'ingress', 'service.sock');
    const ingress = createServer((client) => {
      // The ingress dir is writable from inside: never follow something else planted there.
      let isSocket = false;
      try {
        isSocket = lstatSync(ingressPath).isSocket();
      } catch {
        isSocket = false;
      }
      if (!isSocket) {
        client.destroy();
        return;
      }
      pipeBoth(client, connect(ingressPath));
    });
    servers.push(ingress);
    await listen(ingress, options.servicePort, '127.0.0.1');
  } catch (error) {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    throw error;
  }
  return {
    async close() {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((r) => {
              s.close(() => r());
              // Open connections end with the sandbox; close() only stops accepting.
            }),
        ),
      );
    },
  };
}

/** Directories the bundled daemon needs to run inside a sandbox: Node's install and the application. */
export function defaultReadOnlyDirs(): string[] {
  const nodeRoot = dirname(dirname(process.execPath));
  const appRoot = resolve(new URL('../..', import.meta.url).pathname);
  return [...new Set([nodeRoot, appRoot])].filter((dir) => existsSync(dir));
}

export const BRIDGE_SCRIPT = new URL('./local-bridge.ts', import.meta.url).pathname;
