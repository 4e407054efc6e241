// Reading what the mirror holds: working clones for the LOCAL provider and single files at a commit.
import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { GitCommandError, GitRefNotFoundError } from './errors';
import type { Mirror } from './mirror';
import { pick, type RefCache } from './ref-cache';
import { assertBranchName, normalizeRepoPath, parseRepo, type RepoRef } from './refs';
import type { WorkspaceGitOptions } from './types';

export interface WorkspaceOptions {
  mirror: Mirror;
  refs: RefCache;
  /** Largest file readFileAtRef returns. @default 64 MiB */
  maxFileBytes?: number;
}

const MISSING_FILE =
  /does not exist|exists on disk, but not in|bad file|Not a valid object name|not a valid|expected blob/i;

export function createWorkspaces({ mirror, refs, maxFileBytes: maxBytes }: WorkspaceOptions) {
  const { git, failure, ensureMirror, ensureCommit, lsRemote } = mirror;
  const maxFileBytes = maxBytes ?? 64 * 1024 * 1024;

  return {
    async readFileAtRef(repoRef: RepoRef, ref: string, path: string): Promise<Buffer | null> {
      const repo = parseRepo(repoRef);
      const file = normalizeRepoPath(path);
      const at = await refs.fetchRef(repo, ref);
      if (!at) return null;
      const args = [`--git-dir=${at.mirrorDir}`, 'cat-file', 'blob', `${at.commit}:${file}`];
      const result = await git(repo, args, { maxOutputBytes: maxFileBytes });
      if (result.exitCode === 0 && !result.outputTooLarge) return result.stdout;
      if (result.outputTooLarge) {
        throw new GitCommandError(
          args,
          null,
          '',
          `${file} is larger than maxFileBytes (${maxFileBytes} bytes)`,
        );
      }
      if (!result.timedOut && MISSING_FILE.test(result.stderr)) return null;
      throw failure(repo, args, result);
    },

    async cloneWorkspace(
      repoRef: RepoRef,
      branch: string,
      targetDir: string,
      workspace: WorkspaceGitOptions = {},
    ): Promise<{ commit: string }> {
      assertBranchName(branch);
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const targetRef = `refs/heads/${branch}`;
      const target = pick(await lsRemote(repo, dir, [targetRef]), targetRef);
      // needRef: the local clone below checks out the mirror's copy of the branch.
      const commit = target ? await ensureCommit(repo, dir, target, true) : null;
      if (!commit) throw new GitRefNotFoundError(branch, repo.url);

      const destination = resolve(targetDir);
      // A local clone hard-links the mirror's objects (copies across file systems); no alternates
      // remain, so the workspace does not depend on the cache. Without git's templates: their
      // sample hooks and description were copied into every workspace (8 of a clone's 31 ms here).
      // The clone writes the workspace's configuration itself (`--config`, one process instead of
      // one per key); a key git could not split from its value at the first '=' is set on its own.
      const entries = Object.entries(workspace.config ?? {});
      const inline = entries.filter(([key]) => !key.includes('='));
      const cloneArgs = [
        'clone',
        '--quiet',
        '--single-branch',
        '--template=',
        '--branch',
        branch,
        ...inline.flatMap(([key, value]) => ['--config', `${key}=${value}`]),
        '--',
        dir,
        destination,
      ];
      const cloned = await git(repo, cloneArgs);
      if (cloned.exitCode !== 0) throw failure(repo, cloneArgs, cloned);
      try {
        // The checked-out commit is read while origin is set (the config's lock file leaves a
        // reader the old config, and it reads only HEAD's ref).
        const headArgs = ['-C', destination, 'rev-parse', 'HEAD'];
        const setUrl = ['-C', destination, 'remote', 'set-url', 'origin', workspace.originUrl ?? repo.url];
        const [updated, head] = await Promise.all([git(repo, setUrl), git(repo, headArgs)]);
        if (updated.exitCode !== 0) throw failure(repo, setUrl, updated);
        for (const [key, value] of entries.filter(([key]) => key.includes('='))) {
          const configArgs = ['-C', destination, 'config', '--local', key, value];
          const configured = await git(repo, configArgs);
          if (configured.exitCode !== 0) throw failure(repo, configArgs, configured);
        }
        if (head.exitCode !== 0) throw failure(repo, headArgs, head);
        return { commit: head.stdout.toString('utf8').trim() };
      } catch (error) {
        // Never leave a workspace whose origin still points at the cache.
        await rm(destination, { recursive: true, force: true });
        throw error;
      }
    },
  };
}
