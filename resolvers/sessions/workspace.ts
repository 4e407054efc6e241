// The session branch read from the server's git mirror (the workspace view): its diff against the
// commit it was cut from, per file; a directory listing; a file's content. Nothing asks the sandbox,
// so all of it works after the session stopped. The branch is fetched from the upstream when it can
// be (the sandbox pushes there) and read from the mirror as last seen when it cannot.
import type { Db } from '../platform';
import type { Principal } from '../auth/principal';
import { assertCanReadSession } from '../auth/authz';
import { NotFoundError, badUserInput } from '../errors';
import type { GitService, RepoRef } from '../git/git';
import { repoRef } from '../git/project-repo';

export type FileChangeStatus = 'ADDED' | 'MODIFIED' | 'DELETED' | 'RENAMED' | 'COPIED' | 'TYPE_CHANGED';

export interface FileChangeView {
  path: string;
  previousPath: string | null;
  status: FileChangeStatus;
  additions: number;
  deletions: number;
  binary: boolean;
  patch: string | null;
  patchTruncated: boolean;
}

export interface SessionChangesView {
  baseCommit: string;
  headCommit: string;
  additions: number;
  deletions: number;
  files: FileChangeView[];
}

export interface TreeEntryView {
  path: string;
  name: string;
  type: 'FILE' | 'DIRECTORY' | 'SYMLINK' | 'SUBMODULE';
  sizeBytes: number | null;
}

export interface RepoFileView {
  path: string;
  commit: string;
  sizeBytes: number;
  binary: boolean;
  text: string | null;
  truncated: boolean;
}

/** One file's patch is cut past this many characters. */
export const MAX_PATCH_CHARS = 256 * 1024;
/** A file's text is cut past this many bytes. */
export const MAX_FILE_BYTES = 1024 * 1024;

const STATUS: Record<string, FileChangeStatus> = {
  A: 'ADDED',
  M: 'MODIFIED',
  D: 'DELETED',
  R: 'RENAMED',
  C: 'COPIED',
  T: 'TYPE_CHANGED',
};

/** A repository path as the caller gave it, normalised; refuses climbing out and absolute paths. */
export function cleanPath(path: string, field: string[]): string {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..') || path.includes('\0'))
    throw badUserInput('path must stay inside the repository.', field);
  return parts.join('/');
}

/** `git diff --raw -z` output → [status letter, path, previous path]. */
export function parseRaw(out: string): Array<{ status: string; path: string; previousPath: string | null }> {
  const fields = out.split('\0');
  const entries: Array<{ status: string; path: string; previousPath: string | null }> = [];
  for (let i = 0; i < fields.length; ) {
    const head = fields[i++] ?? '';
    if (!head.startsWith(':')) continue;
    const letter = head.split(' ').pop()?.[0] ?? 'M';
    if (letter === 'R' || letter === 'C') {
      const from = fields[i++] ?? '';
      const to = fields[i++] ?? '';
      entries.push({ status: letter, path: to, previousPath: from });
    } else {
      entries.push({ status: letter, path: fields[i++] ?? '', previousPath: null });
    }
  }
  return entries;
}

/** `git diff --numstat -z` output → counts per path ("-" counts: binary). */
export function parseNumstat(
  out: string,
): Map<string, { additions: number; deletions: number; binary: boolean }> {
  const stats = new Map<string, { additions: number; deletions: number; binary: boolean }>();
  const fields = out.split('\0');
  for (let i = 0; i < fields.length; i += 1) {
    const match = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(fields[i] ?? '');
    if (!match) continue;
    let path = match[3] ?? '';
    if (path === '') {
      path = fields[i + 2] ?? '';
      i += 2;
    }
    const binary = match[1] === '-';
    stats.set(path, {
      additions: binary ? 0 : Number(match[1]),
      deletions: binary ? 0 : Number(match[2]),
      binary,
    });
  }
  return stats;
}

/** Splits a multi-file patch into its files' sections, in order. */
export function splitPatch(out: string): string[] {
  if (!out) return [];
  return out.split(/^(?=diff --git )/m).filter((section) => section.startsWith('diff --git '));
}

export interface WorkspaceServiceOptions {
  db: Db;
  git: GitService;
  encryptionKey: Buffer;
}

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;

export function createWorkspaceService(options: WorkspaceServiceOptions) {
  const { db, git } = options;

  async function sessionBranch(principal: Principal, sessionId: string) {
    const session = await db.session.findUnique({
      where: { id: sessionId },
      include: { project: { select: { repositoryUrl: true, gitCredentialEnc: true } } },
    });
    if (!session) throw new NotFoundError('No session with that id.', ['id']);
    assertCanReadSession(principal, session);
    return { session, repo: repoRef(session.project, options.encryptionKey) };
  }

  async function mirror(repo: RepoRef, args: string[]) {
    return git.inMirror(repo, args);
  }

  /** The branch's head commit: fetched from the upstream, else the mirror's copy; null: none. */
  async function headOf(repo: RepoRef, branch: string): Promise<string | null> {
    try {
      const fetched = await git.fetchRef(repo, `refs/heads/${branch}`);
      if (fetched) return fetched.commit;
    } catch {
      // upstream unreachable: read what the mirror last saw
    }
    const local = await mirror(repo, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`]);
    return local.exitCode === 0 ? local.stdout.toString('utf8').trim() : null;
  }

  return {
    /** Session.changes: the branch's diff against its base commit, per file. */
    async changes(
      principal: Principal,
      sessionId: string,
      path: string | null,
    ): Promise<SessionChangesView | null> {
      const { session, repo } = await sessionBranch(principal, sessionId);
      if (!session.baseCommit) return null;
      const head = await headOf(repo, session.branchName);
      if (!head) return null;
      const only = path === null ? [] : ['--', cleanPath(path, ['path'])];
      const range = [session.baseCommit, head];
      const [raw, numstat, patch] = await Promise.all([
        mirror(repo, ['diff', '--raw', '-z', '-M', '--no-abbrev', ...range, ...only]),
        mirror(repo, ['diff', '--numstat', '-z', '-M', ...range, ...only]),
        mirror(repo, ['diff', '-M', '--no-color', '--no-ext-diff', ...range, ...only]),
      ]);
      for (const result of [raw, numstat]) {
        if (result.exitCode !== 0)
          throw new Error(`git diff failed: ${result.stderr.toString().slice(0, 300)}`);
      }
      const stats = parseNumstat(numstat.stdout.toString('utf8'));
      const sections =
        patch.exitCode === 0 && !patch.outputTooLarge ? splitPatch(patch.stdout.toString('utf8')) : [];
      const files = parseRaw(raw.stdout.toString('utf8')).map((entry, index): FileChangeView => {
        const stat = stats.get(entry.path) ?? { additions: 0, deletions: 0, binary: false };
        const section = sections[index] ?? null;
        const tooLong = section !== null && section.length > MAX_PATCH_CHARS;
        return {
          path: entry.path,
          previousPath: entry.previousPath,
          status: STATUS[entry.status] ?? 'MODIFIED',
          additions: stat.additions,
          deletions: stat.deletions,
          binary: stat.binary,
          patch:
            stat.binary || section === null ? null : tooLong ? section.slice(0, MAX_PATCH_CHARS) : section,
          patchTruncated: tooLong || (!stat.binary && section === null),
        };
      });
      return {
        baseCommit: session.baseCommit,
        headCommit: head,
        additions: files.reduce((n, f) => n + f.additions, 0),
        deletions: files.reduce((n, f) => n + f.deletions, 0),
        files,
      };
    },

    /** Session.tree: one directory of the branch, directories first. */
    async tree(principal: Principal, sessionId: string, path: string): Promise<TreeEntryView[] | null> {
      const { session, repo } = await sessionBranch(principal, sessionId);
      const dir = cleanPath(path, ['path']);
      const head = await headOf(repo, session.branchName);
      if (!head) return null;
      const result = await mirror(repo, ['ls-tree', '-z', '--long', dir ? `${head}:${dir}` : head]);
      if (result.exitCode !== 0) return null;
      const entries: TreeEntryView[] = [];
      for (const line of result.stdout.toString('utf8').split('\0')) {
        // "<mode> <type> <object> <size>\t<name>"
        const match = /^(\d+) (\w+) [0-9a-f]+ +(-|\d+)\t(.*)$/s.exec(line);
        if (!match) continue;
        const [, mode, type, size, name] = match as unknown as [string, string, string, string, string];
        entries.push({
          path: dir ? `${dir}/${name}` : name,
          name,
          type:
            type === 'tree'
              ? 'DIRECTORY'
              : type === 'commit'
                ? 'SUBMODULE'
                : mode === '120000'
                  ? 'SYMLINK'
                  : 'FILE',
          sizeBytes: size === '-' ? null : Number(size),
        });
      }
      const rank = (e: TreeEntryView) => (e.type === 'DIRECTORY' ? 0 : 1);
      return entries.sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
    },

    /** Session.file: one file of the branch (UTF-8 text, cut at MAX_FILE_BYTES). */
    async file(principal: Principal, sessionId: string, path: string): Promise<RepoFileView | null> {
      const { session, repo } = await sessionBranch(principal, sessionId);
      const file = cleanPath(path, ['path']);
      if (!file) throw badUserInput('path names a file.', ['path']);
      const head = await headOf(repo, session.branchName);
      if (!head) return null;
      const size = await mirror(repo, ['cat-file', '-s', `${head}:${file}`]);
      const kind = await mirror(repo, ['cat-file', '-t', `${head}:${file}`]);
      if (size.exitCode !== 0 || kind.stdout.toString('utf8').trim() !== 'blob') return null;
      const sizeBytes = Number(size.stdout.toString('utf8').trim());
      const blob = await mirror(repo, ['cat-file', 'blob', `${head}:${file}`]);
      const bytes = blob.stdout.subarray(0, MAX_FILE_BYTES);
      const binary = bytes.subarray(0, 8_000).includes(0);
      return {
        path: file,
        commit: head,
        sizeBytes,
        binary,
        text: binary ? null : bytes.toString('utf8'),
        truncated: sizeBytes > bytes.length,
      };
    },
  };
}
