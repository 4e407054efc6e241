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

/** Ports that processes of `root`'s tree listen on. */
export async function sandboxListeningPorts(root = process.pid): Promise<Set<number>> {
  const sockets = await listeningSockets();
  const ports = new Set<number>();
  if (sockets.size === 0) return ports;
  for (const pid of await processTree(root)) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      const port = inode ? sockets.get(inode) : undefined;
      if (port !== undefined) ports.add(port);
    }
  }
  return ports;
}
