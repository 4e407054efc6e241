// Which TCP ports belong to this sandbox: those a process of the daemon's own tree (the daemon,
// OpenCode, whatever they started) listens on. The proxy forwards the target-port header only to
// these, so a valid user-context header cannot reach the control plane, PostgreSQL, Redis or any
// other service that shares the host's loopback with an unisolated sandbox. Linux /proc only.
import { readSmallText, readdir, readlink } from './fs';

const LISTEN = '0A';

/** Socket inode → port of every listening TCP socket (IPv4 and IPv6) in this network namespace. */
async function listeningSockets(): Promise<Map<string, number>> {
  const sockets = new Map<string, number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readSmallText(file).catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      if (fields.length < 10 || fields[3] !== LISTEN) continue;
      const port = Number.parseInt(fields[1]?.split(':')[1] ?? '', 16);
      if (Number.isInteger(port) && fields[9] && fields[9] !== '0') sockets.set(fields[9], port);
    }
  }
  return sockets;
}

/** `root` and every process descending from it. */
async function processTree(root: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = await readSmallText(`/proc/${pid}/stat`).catch(() => null);
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    const ppid = stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) : Number.NaN;
    if (Number.isInteger(ppid)) parents.set(pid, ppid);
  }
  const tree = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of parents) {
      if (!tree.has(pid) && tree.has(ppid)) {
        tree.add(pid);
        grew = true;
      }
    }
  }
  return [...tree];
}

/** A listening socket a process of the tree holds: its port and where it is held. */
interface HeldSocket {
  inode: string;
  port: number;
  pid: number;
  fd: string;
}

/** Every listening socket that a process of `root`'s tree holds. */
async function sandboxSockets(root: number): Promise<HeldSocket[]> {
  const sockets = await listeningSockets();
  const held: HeldSocket[] = [];
  if (sockets.size === 0) return held;
  for (const pid of await processTree(root)) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      const port = inode ? sockets.get(inode) : undefined;
      if (inode && port !== undefined) held.push({ inode, port, pid, fd });
    }
  }
  return held;
}

/** Ports that processes of `root`'s tree listen on. */
export async function sandboxListeningPorts(root = process.pid): Promise<Set<number>> {
  return new Set((await sandboxSockets(root)).map((socket) => socket.port));
}

/** Whether the process still holds the socket at that fd (a closed fd, a reused one: no). */
async function stillHeld(socket: HeldSocket): Promise<boolean> {
  const link = await readlink(`/proc/${socket.pid}/fd/${socket.fd}`).catch(() => '');
  return link === `socket:[${socket.inode}]`;
}

/** How long a port's sockets, once a full scan found the tree holding them, are trusted without one. */
export const SANDBOX_PORT_TTL_MS = 1_000;

export interface SandboxPortsOptions {
  /** @default process.pid */
  root?: number;
  /** @default SANDBOX_PORT_TTL_MS */
  ttlMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/**
 * Whether a process of the daemon's tree listens on a port, for a proxy that asks on every request.
 * A full scan reads /proc/net/tcp{,6} (~2 ms of kernel time each on a host with a large TCP hash,
 * whatever the namespace holds) and every process's fds; it remembers which fd of which process
 * held the port's listening socket. For `ttlMs` after it, a request only checks that fd still
 * links to that socket (one readlink): a socket's port never changes, and while the tree holds it
 * bound no process outside the tree can take the port. A port closed (the fd gone, or reused for
 * another socket) misses and is scanned in full at once, as before, so a process that takes it
 * over is refused; a refusal is never remembered. What the window trusts beyond the full scan is
 * a socket the tree opened and still holds but shut down without closing (or handed to a process
 * that left the tree), for at most `ttlMs`. A reserved port always takes the full scan, as an
 * unused one does, so its answer takes as long.
 */
export class SandboxPorts {
  private readonly held = new Map<number, { sockets: HeldSocket[]; at: number }>();

  constructor(private readonly options: SandboxPortsOptions = {}) {}

  /** Whether the tree serves `port`; `reserved`: refused whatever the tree holds (see above). */
  async owns(port: number, reserved = false): Promise<boolean> {
    const now = (this.options.now ?? Date.now)();
    const known = reserved ? undefined : this.held.get(port);
    if (known && now - known.at < (this.options.ttlMs ?? SANDBOX_PORT_TTL_MS)) {
      for (const socket of known.sockets) if (await stillHeld(socket)) return true;
    }
    this.held.delete(port);
    const sockets = (await sandboxSockets(this.options.root ?? process.pid)).filter((s) => s.port === port);
    if (reserved || sockets.length === 0) return false;
    this.held.set(port, { sockets, at: now });
    return true;
  }
}
