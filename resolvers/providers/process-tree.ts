// Processes that belong to a sandbox but left its process group (the daemon starts OpenCode in a
// group of its own so it can signal OpenCode's tool subprocesses together). A SIGKILLed daemon
// cannot take them down, so whoever tears the sandbox down finds them by the environment every
// sandbox process inherits.
import { closeSync, openSync, readSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Processes read between two turns of the event loop (a few syscalls each, about a millisecond). */
const SCAN_BATCH = 64;
/** One buffer for every environ read, grown when a process's environment is larger. */
let scratch = Buffer.allocUnsafe(16 * 1024);

/** The whole of /proc/<pid>/environ in `scratch` (length read), or -1 when it cannot be read. */
function readEnviron(pid: number): number {
  let fd: number;
  try {
    fd = openSync(`/proc/${pid}/environ`, 'r');
  } catch {
    return -1;
  }
  try {
    let length = 0;
    for (;;) {
      if (length === scratch.length) {
        const grown = Buffer.allocUnsafe(scratch.length * 2);
        scratch.copy(grown, 0, 0, length);
        scratch = grown;
      }
      const n = readSync(fd, scratch, length, scratch.length - length, null);
      if (n === 0) return length;
      length += n;
    }
  } catch {
    return -1;
  } finally {
    closeSync(fd);
  }
}

/**
 * PIDs whose environment contains `name=value` (Linux /proc; other processes' environ needs root or the same user).
 *
 * Every process on the host is read, at every sandbox stop, and a shared host runs hundreds. One
 * fs/promises readFile per process allocated a fresh 64 KiB buffer each (a /proc file reports size
 * 0), all at once: tens of MiB of short-lived backing stores per scan, a large share of a soak's
 * garbage-collection time and event-loop stalls. Reads are synchronous into one reused buffer, in
 * batches that yield to the event loop between them.
 */
export async function pidsWithEnvironment(name: string, value: string): Promise<number[]> {
  const needle = Buffer.from(`\0${name}=${value}\0`);
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const pids: number[] = [];
  let sinceYield = 0;
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (++sinceYield === SCAN_BATCH) {
      sinceYield = 0;
      await nextTurn();
    }
    const length = readEnviron(pid);
    if (length <= 0) continue;
    const environ = scratch.subarray(0, length);
    // Entries are NUL-terminated: the first one has no NUL before it.
    if (environ.indexOf(needle.subarray(1)) === 0 || environ.indexOf(needle) !== -1) pids.push(pid);
  }
  return pids;
}

/**
 * SIGKILLs every process (and its process group) whose environment contains `name=value`, and
 * resolves only once none is left: a signal is delivered asynchronously, so a process can still be
 * listed right after kill() returns, and one may fork between our scan and its death. Rescans and
 * kills again until the scan comes back empty; throws when processes survive `timeoutMs`.
 * Resolves to how many distinct processes it killed.
 */
export async function killByEnvironment(name: string, value: string, timeoutMs = 5_000): Promise<number> {
  const killed = new Set<number>();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = await pidsWithEnvironment(name, value);
    if (pids.length === 0) return killed.size;
    if (Date.now() > deadline) {
      throw new Error(
        `processes with ${name}=${value} survived SIGKILL for ${timeoutMs} ms: ${pids.join(', ')}`,
      );
    }
    for (const pid of pids) {
      killed.add(pid);
      for (const target of [-pid, pid]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch {
          // not a group leader, or already gone
        }
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
