// Isolation of LOCAL sandboxes with bubblewrap. A sandbox gets its own user, PID, IPC, UTS, cgroup
// and network namespaces; its filesystem is read-only system directories, the Node runtime and the
// few files of the product it runs (the daemon bundle, the CLI bundle, the entrypoint, the bridge
// and OpenCode's binary), a private /tmp, and read-write only its own workspace and home. The data
// dir (database files, keys, the bootstrap token, other sandboxes) is covered by an empty tmpfs.
//
// Privileges (R-ISO-2): two bubblewrap processes. The outer one builds the mounts and namespaces;
// run by a root server it runs as root, so it can bind paths an unprivileged uid could not even
// traverse (a data dir of mode 0700). Its command drops to the sandbox's own unprivileged host
// uid/gid (setpriv) and runs the inner one, which enters a user namespace of that uid, drops every
// capability (bounding set included), disables further user namespaces, starts a new session and
// dies with its parent. The mounts it inherits were made by a more privileged namespace, so the
// kernel locks them: no remount, no umount, and /proc/sys stays read-only. A server that is not root
// runs both as its own uid (the outer one then needs a user namespace of its own too).
//
// Network: the sandbox's namespace has loopback only, so PostgreSQL, Redis and every other
// host-local service are out of reach by construction. What it may reach (the API, plus ports an
// operator lists, e.g. a model endpoint) is forwarded over Unix sockets the server listens on in
// the sandbox's run dir (see local-bridge.mjs); the daemon's service port comes back the same way.
// Unix sockets cross network namespaces and need no privileges, so this works for a root and a
// rootless server alike, unlike veth pairs (root, plus firewall rules to keep the host's other
// loopback services out).
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
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
 * True when bubblewrap can build a sandbox as bwrapArgs does on this host: every namespace, the drop
 * to an unprivileged uid when root, and the inner user namespace without capabilities or further
 * user namespaces (bubblewrap 0.8 or later). Probed once per binary and process: the answer is a
 * property of the host, and the probe blocks while it runs.
 */
export function bwrapAvailable(bin = 'bwrap'): boolean {
  let available = bwrapProbes.get(bin);
  if (available === undefined) {
    const root = process.getuid?.() === 0;
    const args = ['--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try'];
    if (!root) args.push('--unshare-user');
    args.push('--ro-bind', '/', '/', '--proc', '/proc', '--');
    if (root) args.push('setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--');
    args.push(bin, '--unshare-user', '--disable-userns', '--cap-drop', 'ALL', '--new-session');
    args.push('--die-with-parent', '--dev-bind', '/', '/', 'true');
    const probe = spawnSync(bin, args, { stdio: 'ignore', timeout: 10_000 });
    available = probe.status === 0;
    bwrapProbes.set(bin, available);
  }
  return available;
}

/** The host uid and gid a sandbox runs as. */
export interface SandboxIdentity {
  uid: number;
  gid: number;
}

export interface BwrapArgsOptions {
  workspace: string;
  home: string;
  runDir: string;
  dataDir: string;
  /** Paths (directories or files) bound read-only besides the system ones: Node, the product's runtime files. */
  readOnly: string[];
  /** Directories inside the data dir that stay visible, read-only (e.g. the CLI shim's bin). */
  visibleInDataDir?: string[];
  /**
   * The unprivileged host uid/gid the sandbox runs as, when the server is root (it must not be 0).
   * Null or absent: the server's own uid, which must then not be root.
   */
  identity?: SandboxIdentity | null;
  /** Files bound read-only over /etc/passwd and /etc/group (listing the sandbox's uid). */
  etc?: { passwd: string; group: string };
}

/**
 * bubblewrap arguments up to (not including) the command: the outer bwrap, the drop to the
 * sandbox's uid and the inner bwrap (see the top of this file). The command follows directly.
 */
export function bwrapArgs(options: BwrapArgsOptions): string[] {
  const identity = options.identity ?? null;
  if (identity && (identity.uid === 0 || identity.gid === 0))
    throw new Error('a sandbox never runs as host root');
  const args = ['--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try'];
  // Root switches uid below; a user namespace here would map only root. Otherwise bwrap needs one.
  if (!identity) args.push('--unshare-user');
  args.push('--hostname', 'sandbox', '--proc', '/proc', '--dev', '/dev');
  // Mounted in this order so later ones cover earlier ones. A private /tmp first: the application
  // and its Node runtime may live below /tmp (a checkout in /tmp), and their read-only binds must
  // stay visible over it.
  args.push('--perms', '1777', '--tmpfs', '/tmp');
  // POSIX shared memory (Python's multiprocessing, browsers): private, like /tmp.
  args.push('--perms', '1777', '--tmpfs', '/dev/shm');
  // The parents of a bind's destination are created first, mode 0755 (bubblewrap would make them
  // 0700 and root's, which the sandbox's uid cannot traverse); an existing directory is left as is.
  const bind = (flag: '--bind' | '--ro-bind' | '--ro-bind-try', source: string, dest: string) => {
    if (dirname(dest) !== '/') args.push('--dir', dirname(dest));
    args.push(flag, source, dest);
  };
  for (const dir of SYSTEM_DIRS) bind('--ro-bind-try', dir, dir);
  for (const entry of ETC_ENTRIES) {
    const path = join('/etc', entry);
    if (options.etc && entry === 'passwd') bind('--ro-bind', options.etc.passwd, path);
    else if (options.etc && entry === 'group') bind('--ro-bind', options.etc.group, path);
    else bind('--ro-bind-try', path, path);
  }
  for (const path of options.readOnly) bind('--ro-bind', path, path);
  // The data dir may sit inside the application directory (./.data) or /tmp; either way it is
  // empty inside.
  args.push('--tmpfs', resolve(options.dataDir));
  // Read-only binds that must stay visible over the empty data dir (the CLI shim in <dataDir>/bin).
  for (const dir of options.visibleInDataDir ?? []) bind('--ro-bind', dir, dir);
  bind('--bind', options.workspace, options.workspace);
  bind('--bind', options.home, options.home);
  bind('--ro-bind', join(options.runDir, 'egress'), join(SANDBOX_RUN_DIR, 'egress'));
  bind('--bind', join(options.runDir, 'ingress'), join(SANDBOX_RUN_DIR, 'ingress'));
  // Nothing else is writable: the root holding the mount points (/etc, /run, the parents of the
  // binds) becomes read-only, and every mount below keeps its own flags.
  args.push('--remount-ro', '/');
  args.push('--chdir', options.workspace, '--');
  if (identity) {
    args.push(
      'setpriv',
      `--reuid=${identity.uid}`,
      `--regid=${identity.gid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
    );
  }
  args.push(
    'bwrap',
    '--unshare-user',
    '--disable-userns',
    '--cap-drop',
    'ALL',
    '--new-session',
    '--die-with-parent',
    // The outer sandbox's tree, as it is (--dev-bind: /dev's device nodes stay usable).
    '--dev-bind',
    '/',
    '/',
    '--chdir',
    options.workspace,
  );
  return args;
}

/** The /etc/passwd and /etc/group lines that name a sandbox's uid (`sandbox`, home = its home). */
export function sandboxEtcEntries(
  identity: SandboxIdentity,
  home: string,
): { passwd: string; group: string } {
  return {
    passwd: `sandbox:x:${identity.uid}:${identity.gid}:sandbox:${home}:/bin/sh\n`,
    group: `sandbox:x:${identity.gid}:\n`,
  };
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
  /** The sandbox's uid/gid: it owns the egress sockets (connecting needs write access) and the ingress dir. */
  owner?: SandboxIdentity | null;
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
  const ingressDir = join(options.runDir, 'ingress');
  mkdirSync(ingressDir, { recursive: true });
  const owner = options.owner ?? null;
  if (owner) {
    chownSync(ingressDir, owner.uid, owner.gid);
    chmodSync(ingressDir, 0o700);
  }
  try {
    for (const [inside, hostPort] of options.egress) {
      const path = join(egressDir, `${inside}.sock`);
      rmSync(path, { force: true });
      const server = createServer((client) => pipeBoth(client, connect(hostPort, '127.0.0.1')));
      servers.push(server);
      await listen(server, path);
      if (owner) {
        chownSync(path, owner.uid, owner.gid);
        chmodSync(path, 0o600);
      }
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

export const BRIDGE_SCRIPT = new URL('./local-bridge.mjs', import.meta.url).pathname;

/** The line a held bridge waits for on its stdin before it runs the entry (local-bridge.mjs). */
export const BRIDGE_GO = 'go';

/**
 * What an isolated sandbox sees of this host's software besides the system directories: Node's
 * install and, of the product, only the files the daemon and the CLI run (the daemon and CLI
 * bundles, the entrypoint, the network bridge, OpenCode's platform package). Never the checkout
 * itself, its .git, sources, configuration or the rest of node_modules.
 */
export function defaultReadOnlyPaths(): string[] {
  const nodeRoot = dirname(dirname(process.execPath));
  const product = (path: string) => new URL(`../../${path}`, import.meta.url).pathname;
  const paths = [
    nodeRoot,
    product('dist/singulacomp-agent.mjs'),
    product('dist/singulacomp.mjs'),
    product('cli/entrypoint.sh'),
    BRIDGE_SCRIPT,
  ];
  // OpenCode's binary, where the daemon resolves it (agent/opencode.ts) from the bundle in dist/.
  const require = createRequire(product('dist/singulacomp-agent.mjs'));
  for (const name of [`opencode-linux-${process.arch}`, `opencode-linux-${process.arch}-baseline`]) {
    try {
      paths.push(dirname(require.resolve(`${name}/package.json`)));
    } catch {
      // not installed for this platform
    }
  }
  return [...new Set(paths)].filter((path) => existsSync(path));
}
