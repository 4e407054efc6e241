// Processes that belong to a sandbox but left its process group (the daemon starts OpenCode in a
// group of its own so it can signal OpenCode's tool subprocesses together). A SIGKILLed daemon
// cannot take them down, so whoever tears the sandbox down finds them by the environment every
// sandbox process inherits.
import { readFile, readdir } from 'node:fs/promises';

/** PIDs whose environment contains `name=value` (Linux /proc; other processes' environ needs root or the same user). */
export async function pidsWithEnvironment(name: string, value: string): Promise<number[]> {
  const needle = Buffer.from(`${name}=${value}\0`);
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const pids: number[] = [];
  await Promise.all(
    entries.map(async (entry) => {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid === process.pid) return;
      const environ = await readFile(`/proc/${pid}/environ`).catch(() => null);
      if (
        environ &&
        (environ.indexOf(needle) === 0 || environ.includes(Buffer.concat([Buffer.from([0]), needle])))
      ) {
        pids.push(pid);
      }
    }),
  );
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
