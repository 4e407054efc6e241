// Change requests (R-GIT-2, R-GIT-4): a session branch proposed for the project's default branch.
// Merging is done here with real git on the project's mirror (merge-tree, commit-tree) and pushed
// upstream with a lease on the base commit; it is the only writer of the default branch (the git
// proxy refuses every push to it). A conflict, or a base that moved under a fast-forward, is a
// typed error and changes nothing upstream.
import type { ChangeRequest, MergeMethod } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import { assertCanWriteProject } from '../auth/authz';
import { type Principal, onBehalfOf } from '../auth/principal';
import { authorize, decide, reachOf, refusalError } from '../auth/policy';
import { ConflictError, DomainError, NotFoundError, RepositoryUnreachableError } from '../errors';
import type { Events } from '../events/events';
import type { GitService, RepoRef } from '../git/git';
import { parseId } from '../ids';
import { repoRef } from '../git/project-repo';
import { requireText } from '../validate';

/** Thrown when merging would conflict; `conflicts` lists the paths. Nothing was changed. */
export class MergeConflictError extends DomainError {
  override readonly code: string = 'MERGE_CONFLICT';
  constructor(
    readonly conflicts: string[],
    field: string[] | null = null,
  ) {
    super(
      `The session branch conflicts with the default branch in ${conflicts.join(', ') || 'some files'}: reconcile the session branch (merge the default branch into it) and push, then merge again.`,
      field,
    );
  }
}

/** A push into a checked-out branch refused because its work tree is not clean (updateInstead). */
const DIRTY_WORK_TREE =
  /working directory has (unstaged|staged) changes|up-to-date check failed|could not update working tree/i;

/** Thrown when FAST_FORWARD is asked but the default branch has commits the session branch lacks. */
export class NotFastForwardError extends DomainError {
  override readonly code: string = 'NOT_FAST_FORWARD';
}

export interface ChangeRequestServiceOptions {
  db: Db;
  git: GitService;
  events: Events;
  logger: Logger;
  encryptionKey: Buffer;
  /**
   * Identity of merge and squash commits.
   * @default SingulaComp <merge@singulacomp.invalid>
   */
  committer?: { name: string; email: string };
  /** The clock of mergedAt and closedAt. @default Date.now */
  now?: () => number;
}

interface Comparison {
  headCommit: string;
  baseCommit: string;
  filesChanged: number;
  additions: number;
  deletions: number;
  mergeable: boolean;
  conflicts: string[];
  /** Tree of the merge result when mergeable. */
  tree: string | null;
}

export type ChangeRequestService = ReturnType<typeof createChangeRequestService>;

export function createChangeRequestService(options: ChangeRequestServiceOptions) {
  const { db, git, events } = options;
  const now = options.now ?? Date.now;
  const log = options.logger.child({ module: 'change-requests' });
  const committer = options.committer ?? { name: 'SingulaComp', email: 'merge@singulacomp.invalid' };
  const identity = { 'user.name': committer.name, 'user.email': committer.email };

  async function commitOf(repo: RepoRef, branch: string, field: string[]): Promise<string> {
    let fetched: Awaited<ReturnType<GitService['fetchRef']>>;
    try {
      fetched = await git.fetchRef(repo, `refs/heads/${branch}`);
    } catch (error) {
      throw new RepositoryUnreachableError(
        `Cannot read the project's repository: ${(error as Error).message}`,
        field,
      );
    }
    if (!fetched)
      throw new NotFoundError(`Branch ${branch} does not exist in the project's repository.`, field);
    return fetched.commit;
  }

  async function mirror(repo: RepoRef, args: string[]): Promise<{ code: number | null; out: string }> {
    const result = await git.inMirror(repo, args, identity);
    return { code: result.exitCode, out: result.stdout.toString('utf8') };
  }

  /** Diff statistics and mergeability of head into base, from the mirror. */
  async function compare(repo: RepoRef, headCommit: string, baseCommit: string): Promise<Comparison> {
    const numstat = await mirror(repo, ['diff', '--numstat', '-z', `${baseCommit}...${headCommit}`]);
    let filesChanged = 0;
    let additions = 0;
    let deletions = 0;
    // -z: "<added>\t<deleted>\t<path>\0", renames "<added>\t<deleted>\t\0<from>\0<to>\0".
    const fields = numstat.out.split('\0');
    for (let index = 0; index < fields.length; index += 1) {
      const match = /^(-|\d+)\t(-|\d+)\t(.*)$/.exec(fields[index] ?? '');
      if (!match) continue;
      filesChanged += 1;
      additions += match[1] === '-' ? 0 : Number(match[1]);
      deletions += match[2] === '-' ? 0 : Number(match[2]);
      if (match[3] === '') index += 2;
    }
    const merged = await mirror(repo, [
      'merge-tree',
      '--write-tree',
      '--name-only',
      '-z',
      baseCommit,
      headCommit,
    ]);
    if (merged.code === 0) {
      const tree = merged.out.split('\0')[0]?.trim() ?? null;
      return {
        headCommit,
        baseCommit,
        filesChanged,
        additions,
        deletions,
        mergeable: true,
        conflicts: [],
        tree,
      };
    }
    if (merged.code !== 1) throw new Error(`git merge-tree failed (exit ${merged.code})`);
    // -z --name-only: "<tree>\0<path>\0...\0\0<messages>": conflicted paths up to the empty field.
    const parts = merged.out.split('\0');
    const conflicts: string[] = [];
    for (const part of parts.slice(1)) {
      if (part === '') break;
      if (!conflicts.includes(part)) conflicts.push(part);
    }
    return {
      headCommit,
      baseCommit,
      filesChanged,
      additions,
      deletions,
      mergeable: false,
      conflicts,
      tree: null,
    };
  }

  async function load(principal: Principal, id: string): Promise<ChangeRequest> {
    const changeRequestId = parseId(id, 'ChangeRequest', ['input', 'changeRequestId']);
    const cr = await db.changeRequest.findUnique({ where: { id: changeRequestId } });
    if (!cr) throw new NotFoundError('No change request with that id.', ['input', 'changeRequestId']);
    const reach = reachOf(principal);
    if (reach.kind === 'session' ? reach.projectId !== cr.projectId : reach.accountId !== cr.accountId) {
      throw new NotFoundError('No change request with that id.', ['input', 'changeRequestId']);
    }
    return cr;
  }

  async function publish(cr: ChangeRequest): Promise<ChangeRequest> {
    await events.changeRequest({
      changeRequestId: cr.id,
      projectId: cr.projectId,
      accountId: cr.accountId,
      status: cr.status,
    });
    return cr;
  }

  /** Merges once; the typed errors say why not. */
  async function mergeOnce(
    principal: Principal,
    input: { changeRequestId: string; method: MergeMethod },
  ): Promise<ChangeRequest> {
    const cr = await load(principal, input.changeRequestId);
    assertCanWriteProject(principal, cr, 'projects:write');
    if (cr.status !== 'OPEN') {
      throw new ConflictError(`This change request is ${cr.status}; only an OPEN one can be merged.`, [
        'input',
        'changeRequestId',
      ]);
    }
    const project = await db.project.findUniqueOrThrow({ where: { id: cr.projectId } });
    const repo = repoRef(project, options.encryptionKey);
    const field = ['input', 'changeRequestId'];
    // Merge what the branches are now, not what they were when the request was opened.
    const headCommit = await commitOf(repo, cr.headRef, field);
    const baseCommit = await commitOf(repo, cr.baseRef, field);
    const comparison = await compare(repo, headCommit, baseCommit);
    const refresh = {
      headCommit,
      baseCommit,
      filesChanged: comparison.filesChanged,
      additions: comparison.additions,
      deletions: comparison.deletions,
      mergeable: comparison.mergeable,
      conflicts: comparison.conflicts,
    };

    let newCommit: string;
    if (input.method === 'FAST_FORWARD') {
      const ancestor = await mirror(repo, ['merge-base', '--is-ancestor', baseCommit, headCommit]);
      if (ancestor.code !== 0) {
        await db.changeRequest.update({ where: { id: cr.id }, data: refresh });
        throw new NotFastForwardError(
          `${cr.baseRef} has commits the session branch lacks, so it cannot fast-forward: merge with MERGE or SQUASH, or reconcile the session branch first.`,
          ['input', 'method'],
        );
      }
      newCommit = headCommit;
    } else {
      if (!comparison.mergeable || !comparison.tree) {
        await db.changeRequest.update({ where: { id: cr.id }, data: refresh });
        throw new MergeConflictError(comparison.conflicts, field);
      }
      const message =
        input.method === 'MERGE'
          ? `Merge change request: ${cr.title}\n\nMerges ${cr.headRef} into ${cr.baseRef}.\n`
          : `${cr.title}\n\n${cr.description ? `${cr.description}\n\n` : ''}Squashed from ${cr.headRef}.\n`;
      const parents = input.method === 'MERGE' ? ['-p', baseCommit, '-p', headCommit] : ['-p', baseCommit];
      const committed = await mirror(repo, ['commit-tree', comparison.tree, ...parents, '-m', message]);
      if (committed.code !== 0) throw new Error('git commit-tree failed');
      newCommit = committed.out.trim();
    }

    const ref = `refs/heads/${cr.baseRef}`;
    let results: Awaited<ReturnType<GitService['pushToUpstream']>>;
    try {
      results = await git.pushToUpstream(repo, [{ ref, oldSha: baseCommit, newSha: newCommit }]);
    } catch (error) {
      throw new RepositoryUnreachableError(
        `Cannot push the merge to the project's repository: ${(error as Error).message}`,
        field,
      );
    }
    const verdict = results[0];
    if (!verdict?.ok && DIRTY_WORK_TREE.test(verdict?.reason ?? '')) {
      throw new ConflictError(
        `${cr.baseRef} is checked out in ${project.repositoryUrl} and its work tree has uncommitted changes (${verdict?.reason}): commit or stash them there, then merge again.`,
        field,
      );
    }
    if (!verdict?.ok) {
      throw new ConflictError(
        `${cr.baseRef} moved while merging (${verdict?.reason ?? 'rejected'}); merge again.`,
        field,
      );
    }
    const merged = await db.changeRequest.update({
      where: { id: cr.id },
      data: {
        ...refresh,
        status: 'MERGED',
        mergeMethod: input.method,
        mergeCommit: newCommit,
        mergedAt: new Date(now()),
      },
    });
    log.info({ changeRequestId: cr.id, method: input.method, commit: newCommit }, 'change request merged');
    return publish(merged);
  }

  return {
    load,

    /** The change request by id or null, no read check (`query`: the GraphQL selection). */
    find<Q extends object>(id: string, query?: Q) {
      return db.changeRequest.findUnique({ ...(query ?? {}), where: { id } });
    },

    /** As `find`, for a change request known to exist (an event's): throws when it is gone. */
    get<Q extends object>(id: string, query?: Q) {
      return db.changeRequest.findUniqueOrThrow({ ...(query ?? {}), where: { id } });
    },

    /** openChangeRequest: the session's own sandbox token, or users with sessions:write. */
    async open(
      principal: Principal,
      input: { sessionId: string; title: string; description?: string | null },
    ): Promise<ChangeRequest> {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const session = await db.session.findUnique({ where: { id: sessionId }, include: { project: true } });
      if (!session) throw new NotFoundError('No session with that id.', ['input', 'sessionId']);
      authorize(principal, 'changeRequest.open', session);
      const title = requireText(input.title, ['input', 'title'], { max: 200 });
      const description = input.description
        ? requireText(input.description, ['input', 'description'], { min: 0, max: 20_000 })
        : '';
      const existing = await db.changeRequest.findFirst({ where: { sessionId, status: 'OPEN' } });
      if (existing) {
        throw new ConflictError('This session already has an open change request; merge or close it first.', [
          'input',
          'sessionId',
        ]);
      }
      const project = session.project;
      const repo = repoRef(project, options.encryptionKey);
      const headCommit = await commitOf(repo, session.branchName, ['input', 'sessionId']);
      const baseCommit = await commitOf(repo, project.defaultBranch, ['input', 'sessionId']);
      const comparison = await compare(repo, headCommit, baseCommit);
      const cr = await db.changeRequest.create({
        data: {
          accountId: session.accountId,
          projectId: project.id,
          sessionId,
          title,
          description,
          headRef: session.branchName,
          baseRef: project.defaultBranch,
          headCommit,
          baseCommit,
          filesChanged: comparison.filesChanged,
          additions: comparison.additions,
          deletions: comparison.deletions,
          mergeable: comparison.mergeable,
          conflicts: comparison.conflicts,
          createdById: onBehalfOf(principal),
        },
      });
      log.info({ changeRequestId: cr.id, sessionId, mergeable: cr.mergeable }, 'change request opened');
      return publish(cr);
    },

    /**
     * mergeChangeRequest: users and service accounts with projects:write. A refused merge is logged
     * (with the request's id) before its typed error answers.
     */
    async merge(
      principal: Principal,
      input: { changeRequestId: string; method: MergeMethod },
    ): Promise<ChangeRequest> {
      try {
        return await mergeOnce(principal, input);
      } catch (error) {
        const code = error instanceof DomainError ? error.code : 'INTERNAL';
        log[error instanceof DomainError ? 'info' : 'warn'](
          {
            changeRequestId: input.changeRequestId,
            method: input.method,
            code,
            reason: (error as Error).message,
          },
          'change request merge failed',
        );
        throw error;
      }
    },

    /** closeChangeRequest: the session's own sandbox token, or users with sessions:write. */
    async close(principal: Principal, input: { changeRequestId: string }): Promise<ChangeRequest> {
      const cr = await load(principal, input.changeRequestId);
      const decision = decide(principal, 'changeRequest.close', cr);
      if (!decision.allowed) {
        if (decision.status === 404)
          throw new NotFoundError('No change request with that id.', ['input', 'changeRequestId']);
        throw refusalError(decision);
      }
      const { count } = await db.changeRequest.updateMany({
        where: { id: cr.id, status: 'OPEN' },
        data: { status: 'CLOSED', closedAt: new Date(now()) },
      });
      if (count === 0) {
        throw new ConflictError(`This change request is ${cr.status}; only an OPEN one can be closed.`, [
          'input',
          'changeRequestId',
        ]);
      }
      return publish(await db.changeRequest.findUniqueOrThrow({ where: { id: cr.id } }));
    },
  };
}
