// Mutual exclusion for writes to a mirror: an in-process queue per lock path plus an exclusive lock
// file shared by every process using the same cache directory. The file is created with its owner
// already in it (written aside, then hard-linked into place, which fails if the lock exists), so a
// process killed at any point never leaves an ownerless lock. A lock whose owner died (same host,
// pid gone) or that is older than `staleMs` is broken, and so is one with no readable owner after
// OWNERLESS_GRACE_MS (left by an older version that created the file before writing it).
import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface FileLockOptions {
  /** A lock file older than this is considered abandoned. */
  staleMs: number;
  /** Give up waiting after this long. */
  acquireTimeoutMs: number;
}

interface LockOwner {
  pid: number;
  host: string;
  token: string;
}

const queues = new Map<string, Promise<void>>();

/** How old a lock file with no readable owner must be before it is broken. */
export const OWNERLESS_GRACE_MS = 10_000;

/** Runs `task` while holding the lock at `lockPath`, in this process and across processes. */
export async function withLock<T>(
  lockPath: string,
  options: FileLockOptions,
  task: () => Promise<T>,
): Promise<T> {
  const previous = queues.get(lockPath) ?? Promise.resolve();
  let releaseQueue!: () => void;
  const mine = new Promise<void>((release) => {
    releaseQueue = release;
  });
  const tail = previous.then(() => mine);
  queues.set(lockPath, tail);
  await previous;
  try {
    const releaseFile = await acquireFileLock(lockPath, options);
    try {
      return await task();
    } finally {
      await releaseFile();
    }
  } finally {
    releaseQueue();
    if (queues.get(lockPath) === tail) queues.delete(lockPath);
  }
}

/** Thrown when the lock is still held by a live owner after acquireTimeoutMs. */
export class LockTimeoutError extends Error {
  override name = 'LockTimeoutError';
  constructor(readonly lockPath: string) {
    super(`Timed out waiting for lock ${lockPath}; if no process holds it, delete the file.`);
  }
}

async function acquireFileLock(lockPath: string, options: FileLockOptions): Promise<() => Promise<void>> {
  const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomUUID() };
  const deadline = Date.now() + options.acquireTimeoutMs;
  // The owner is written once, beside the lock; each try links it into place.
  const aside = `${lockPath}.${owner.token}`;
  await writeFile(aside, JSON.stringify(owner)).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
    await mkdir(dirname(lockPath), { recursive: true });
    await writeFile(aside, JSON.stringify(owner));
  });
  let delayMs = 5;
  try {
    for (;;) {
      try {
        await link(aside, lockPath);
        return () => releaseFileLock(lockPath, owner.token);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      if (await breakIfStale(lockPath, options.staleMs)) continue;
      if (Date.now() > deadline) throw new LockTimeoutError(lockPath);
      await sleep(delayMs + Math.random() * delayMs);
      delayMs = Math.min(delayMs * 2, 100);
    }
  } finally {
    await unlink(aside).catch(() => undefined);
  }
}

async function releaseFileLock(lockPath: string, token: string): Promise<void> {
  // Only remove the file if it is still ours: a lock broken as stale may have a new owner.
  const current = await readOwner(lockPath);
  if (current?.token === token) await unlink(lockPath).catch(() => undefined);
}

async function readOwner(lockPath: string): Promise<LockOwner | null> {
  try {
    const parsed = JSON.parse(await readFile(lockPath, 'utf8')) as Partial<LockOwner>;
    if (
      typeof parsed.pid === 'number' &&
      typeof parsed.host === 'string' &&
      typeof parsed.token === 'string'
    ) {
      return { pid: parsed.pid, host: parsed.host, token: parsed.token };
    }
    return null;
  } catch {
    return null;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function breakIfStale(lockPath: string, staleMs: number): Promise<boolean> {
  let mtimeMs: number;
  try {
    mtimeMs = (await stat(lockPath)).mtimeMs;
  } catch {
    return true; // released meanwhile: retry at once
  }
  const owner = await readOwner(lockPath);
  const sameHost = owner !== null && owner.host === hostname();
  // Our own pid can only be a previous incarnation (a restarted container reuses pid 1): the
  // in-process queue guarantees this process does not hold the lock now.
  const ownerGone = sameHost && (owner.pid === process.pid || !pidAlive(owner.pid));
  const age = Date.now() - mtimeMs;
  if (!ownerGone && age < staleMs && (owner !== null || age < OWNERLESS_GRACE_MS)) return false;

  // Move the stale file aside atomically, then check we moved the file we judged: if another process
  // broke it first and a live owner re-created it in between, put that one back.
  const aside = `${lockPath}.stale-${randomUUID()}`;
  try {
    await rename(lockPath, aside);
  } catch {
    return true;
  }
  const moved = await readOwner(aside);
  if (moved?.token !== owner?.token) {
    await link(aside, lockPath).catch(() => undefined);
  }
  await unlink(aside).catch(() => undefined);
  return true;
}
