// The mirror lock across processes: a lock file is never without its owner, and one left without
// (a process killed between creating and writing it, as older versions could be) does not block
// for the whole stale window.
import { mkdtempSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { OWNERLESS_GRACE_MS, withLock } from '../../resolvers/git/lock';

// Far beyond the test's timeout: only the rules under test can let these locks through.
const LONG = { staleMs: 600_000, acquireTimeoutMs: 600_000 };

describe('mirror lock file', () => {
  test('holds its owner while held and leaves nothing behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sc-lock-'));
    const lockPath = join(dir, 'mirror.lock');
    const seen = await withLock(lockPath, LONG, async () => ({
      owner: JSON.parse(readFileSync(lockPath, 'utf8')) as { pid: number },
      files: readdirSync(dir),
    }));
    expect(seen.owner.pid).toBe(process.pid);
    expect(seen.files).toEqual(['mirror.lock']);
    expect(readdirSync(dir)).toEqual([]);
  });

  test('a lock file with no owner in it is broken once it is older than the grace, not after staleMs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sc-lock-'));
    const lockPath = join(dir, 'mirror.lock');
    writeFileSync(lockPath, '');
    const past = (Date.now() - OWNERLESS_GRACE_MS - 1_000) / 1000;
    utimesSync(lockPath, past, past);
    expect(await withLock(lockPath, LONG, async () => 'acquired')).toBe('acquired');
    expect(readdirSync(dir)).toEqual([]);
  }, 30_000);

  test('a fresh lock file with no owner in it is respected until the grace has passed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sc-lock-'));
    const lockPath = join(dir, 'mirror.lock');
    writeFileSync(lockPath, '');
    await expect(
      withLock(lockPath, { staleMs: 600_000, acquireTimeoutMs: 200 }, async () => 'acquired'),
    ).rejects.toThrow(/Timed out waiting for lock/);
  });
});
