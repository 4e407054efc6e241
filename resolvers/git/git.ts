// Server-side git: resolves refs in upstream repositories, cuts session branches (R-SES-3), reads
// files at a commit and makes working clones for the LOCAL provider. Upstream credentials stay on
// the server (R-GIT-1): they reach git only as in-memory configuration and are redacted from errors.
//
// This file composes the parts behind the GitService interface (types.ts):
// - mirror.ts: one bare mirror per upstream under `cacheDir/mirrors`, its write lock and the git runner;
// - ref-cache.ts: ref lookups, shared per burst and remembered up to a caller's maxAgeMs;
// - branch-cuts.ts: session branch cuts, batched into one push per upstream;
// - workspaces.ts: working clones and file reads from the mirror;
// - pushes.ts: pushes of mirror commits to the upstream under a lease.
// Session creates accept a ref answer up to SINGULACOMP_REF_CACHE_MS old (pushes made through this
// service forget them).
import { createBranchCuts } from './branch-cuts';
import { createMirror } from './mirror';
import { createPushes } from './pushes';
import { createRefCache } from './ref-cache';
import { assertBranchName, parseRepo } from './refs';
import type { GitService, GitServiceOptions } from './types';
import { createWorkspaces } from './workspaces';

export {
  GitBranchExistsError,
  GitCommandError,
  GitError,
  GitInvalidPathError,
  GitInvalidRefNameError,
  GitInvalidUrlError,
  GitRefNotFoundError,
  GitRepositoryUnreachableError,
} from './errors';
export type { RepoRef } from './refs';
export type {
  GitService,
  GitServiceOptions,
  MirroredCommit,
  RefLookup,
  RefUpdate,
  RefUpdateResult,
  WorkspaceGitOptions,
} from './types';

export function createGitService(options: GitServiceOptions): GitService {
  const mirror = createMirror(options);
  const refs = createRefCache({ mirror, now: options.now ?? Date.now });
  const cuts = createBranchCuts({ mirror, refs, pushLingerMs: options.pushLingerMs });
  const workspaces = createWorkspaces({ mirror, refs, maxFileBytes: options.maxFileBytes });
  const pushes = createPushes({ mirror, refs });
  const { git, failure, ensureMirror, lsRemote, locked } = mirror;

  return {
    resolveRef: refs.resolveRef,
    expectCut: cuts.expectCut,
    cutBranch: cuts.cutBranch,
    readFileAtRef: workspaces.readFileAtRef,
    cloneWorkspace: workspaces.cloneWorkspace,
    pushToUpstream: pushes.pushToUpstream,

    fetchRef(repoRef, ref) {
      return refs.fetchRef(parseRepo(repoRef), ref);
    },

    async defaultBranch(repoRef) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const args = [`--git-dir=${dir}`, 'ls-remote', '--symref', '--', repo.url, 'HEAD'];
      const result = await git(repo, args, { remote: true });
      if (result.exitCode !== 0) throw failure(repo, args, result, { remote: true });
      const match = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(result.stdout.toString('utf8'));
      return match?.[1] ?? null;
    },

    async branchExists(repoRef, branch) {
      assertBranchName(branch);
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      const targetRef = `refs/heads/${branch}`;
      return (await lsRemote(repo, dir, [targetRef])).has(targetRef);
    },

    async mirrorDir(repoRef) {
      const dir = await ensureMirror(parseRepo(repoRef));
      await mirror.recorded(dir);
      return dir;
    },

    async syncMirror(repoRef) {
      return mirror.sync(parseRepo(repoRef));
    },

    async withMirrorLock(repoRef, task) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      return locked(repo, () => task(dir));
    },

    async inMirror(repoRef, args, config) {
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      return git(repo, [`--git-dir=${dir}`, ...args], { config });
    },
  };
}
