// Host uids for LOCAL sandboxes of a root server (R-ISO-2): each sandbox runs as a uid of its own
// from a configured range, so it holds no host privileges and no sandbox can touch another's files.
// A claim is a file named by the uid in a host-wide directory, created exclusively, so servers with
// different data dirs on one host never hand out the same uid; it holds the sandbox directory that
// owns it and is removed when that sandbox is destroyed. A claim whose sandbox directory is gone and
// under whose uid no process runs is stale (a data dir deleted under it) and is taken over.
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { existsSync } from 'node:fs';

export interface LocalUidRange {
  first: number;
  /** How many uids, from `first`. */
  count: number;
}

export interface LocalUidAllocator {
  /** A uid (gid = uid) no other sandbox holds, recorded as `owner`'s (the sandbox directory). */
  claim(owner: string): Promise<{ uid: number; gid: number }>;
  /** Gives the uid back if `owner` holds it. */
  release(uid: number, owner: string): Promise<void>;
}

/** Default range: far above the uids of people and system services, and of the usual subuid ranges. */
export const DEFAULT_LOCAL_UID_RANGE: LocalUidRange = { first: 2_000_000, count: 1_000_000 };
export const DEFAULT_LOCAL_UID_CLAIMS = '/var/lib/singulacomp/local-uids';

/** Parses `first-last` (inclusive). */
export function parseUidRange(text: string): LocalUidRange | null {
  const match = /^(\d+)-(\d+)$/.exec(text.trim());
  if (!match) return null;
  const first = Number(match[1]);
  const last = Number(match[2]);
  if (first < 1000 || last < first || last > 4_294_967_294) return null;
  return { first, count: last - first + 1 };
}

/** True when some process runs with `uid` as its real uid. */
async function uidInUse(uid: number): Promise<boolean> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    const line = status.split('\n').find((l) => l.startsWith('Uid:'));
    if (line && Number(line.split('\t')[1]) === uid) return true;
  }
  return false;
}

export function createUidAllocator(options: { range: LocalUidRange; claimsDir: string }): LocalUidAllocator {
  const { range, claimsDir } = options;
  const claimFile = (uid: number) => join(claimsDir, String(uid));
  return {
    async claim(owner) {
      await mkdir(claimsDir, { recursive: true, mode: 0o700 });
      // Start where the owner hashes to: concurrent claims rarely race for the same file.
      const start = createHash('sha256').update(owner).digest().readUInt32BE(0) % range.count;
      for (let i = 0; i < range.count; i++) {
        const uid = range.first + ((start + i) % range.count);
        try {
          await writeFile(claimFile(uid), owner, { flag: 'wx', mode: 0o600 });
          return { uid, gid: uid };
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        const holder = await readFile(claimFile(uid), 'utf8').catch(() => null);
        if (holder === owner) return { uid, gid: uid };
        if (holder !== null && !existsSync(holder) && !(await uidInUse(uid))) {
          // Stale: take it over (a racing claimer either wins the rewrite or moves on).
          await rm(claimFile(uid), { force: true });
          try {
            await writeFile(claimFile(uid), owner, { flag: 'wx', mode: 0o600 });
            return { uid, gid: uid };
          } catch {
            // someone else took it first
          }
        }
      }
      throw new Error(`no free sandbox uid left in ${range.first}-${range.first + range.count - 1}`);
    },
    async release(uid, owner) {
      const holder = await readFile(claimFile(uid), 'utf8').catch(() => null);
      if (holder === owner) await rm(claimFile(uid), { force: true });
    },
  };
}
