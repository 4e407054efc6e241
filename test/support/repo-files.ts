// An in-memory repository with the RepoFileReader interface of image/repo-files.ts: for tests of
// pure functions over a repository's files (snapshot keys, manifests) that need no git process.
// Commits are immutable snapshots, so a reader pinned to one keeps seeing it, as a git reader does.
import { createHash } from 'node:crypto';
import type { RepoFileEntry, RepoFileReader } from '../../image/repo-files';
import type { CommitOptions, TestRepoFiles } from './git';

interface StoredFile {
  bytes: Buffer;
  mode: string;
}

export interface MemoryRepo {
  /**
   * Same contract as TestRepo.commit in git.ts: writes (or with null deletes) files on top of the
   * previous commit and returns the new commit id.
   */
  commit(files: TestRepoFiles, options?: string | CommitOptions): string;
  /** A reader pinned to a commit id returned by commit(). */
  reader(commit: string): RepoFileReader;
}

/** The object id git gives these bytes as a blob, so entries look like a git reader's. */
function blobOid(bytes: Buffer): string {
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

export function createMemoryRepo(): MemoryRepo {
  const commits = new Map<string, ReadonlyMap<string, StoredFile>>();
  let tip = new Map<string, StoredFile>();
  let counter = 0;
  return {
    commit(changes, options = {}) {
      const { executable = [] } = typeof options === 'string' ? {} : options;
      const next = new Map(tip);
      for (const [path, content] of Object.entries(changes)) {
        if (content === null) next.delete(path);
        else next.set(path, { bytes: Buffer.from(content), mode: next.get(path)?.mode ?? '100644' });
      }
      for (const path of executable) {
        const file = next.get(path);
        if (!file) throw new Error(`cannot make ${path} executable: not a file in the commit`);
        next.set(path, { ...file, mode: '100755' });
      }
      counter++;
      const id = createHash('sha1').update(`memory-commit ${counter}`).digest('hex');
      commits.set(id, next);
      tip = next;
      return id;
    },
    reader(commit) {
      const files = commits.get(commit);
      if (!files) throw new Error(`no commit ${commit} in the in-memory repository`);
      const listEntries = async (): Promise<RepoFileEntry[]> =>
        [...files.entries()]
          .map(([path, file]) => ({ path, mode: file.mode, oid: blobOid(file.bytes) }))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      return {
        listEntries,
        listFiles: async () => (await listEntries()).map((entry) => entry.path),
        readFile: async (path) => {
          const file = files.get(path);
          return file ? Buffer.from(file.bytes) : null;
        },
      };
    },
  };
}
