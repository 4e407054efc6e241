// Branch cuts (R-SES-3): a session create makes its branch upstream from the commit its base ref names.
// Session creates arrive in bursts, so concurrent cuts against one upstream share one push; a create
// announces its cut before it is admitted (expectCut), and a push about to start waits briefly for
// announced cuts (see PUSH_LINGER_MS).
import { type BatchTicket, createKeyedBatcher, type Settled } from '../batch';
import { GitBranchExistsError, GitCommandError, GitRefNotFoundError, redact } from './errors';
import type { FetchTarget, Mirror } from './mirror';
import { batchKey, lsRemotePatterns, MAX_REFS_PER_CALL, pick, type RefCache } from './ref-cache';
import { assertBranchName, assertRefName, isFullSha, type ParsedRepo, parseRepo, type RepoRef } from './refs';

export interface BranchCutOptions {
  mirror: Mirror;
  refs: RefCache;
  /** Longest a push waits for announced cuts. @default PUSH_LINGER_MS */
  pushLingerMs?: number;
}

interface PushCall {
  repo: ParsedRepo;
  dir: string;
  commit: string;
  branch: string;
}

const PUSH_REJECTED_BECAUSE_EXISTS = /stale info|fetch first|non-fast-forward|already exists/i;
/**
 * Longest a push waits for announced cuts by default. A push costs about the same for one branch as
 * for twenty, so on a burst a push that left without the creates admitted a moment after it made
 * them wait for it and then pay a push of their own: with 20 concurrent creates, pushes alternated
 * between one branch and nineteen.
 */
const PUSH_LINGER_MS = 500;

export function createBranchCuts({ mirror, refs: refCache, pushLingerMs }: BranchCutOptions) {
  const { git, failure, secretsOf, ensureMirror, ensureCommit, lsRemote, mirrorPaths, recordPushedBranches } =
    mirror;
  const { sharedLsRemote } = refCache;

  const sharedPush = createKeyedBatcher<PushCall, void>((_key, calls) => pushBranches(calls), {
    maxBatch: MAX_REFS_PER_CALL,
    lingerMs: pushLingerMs ?? PUSH_LINGER_MS,
  });

  /**
   * Creates each call's branch upstream in one `git push` (one refspec and one lease per branch; not
   * atomic, so each branch gets its own verdict). The lease with an empty expected value means "the
   * ref must not exist": git refuses to create over an existing branch, and the server re-checks
   * atomically when it updates the ref. A branch named twice in one batch is pushed once; the other
   * caller gets GitBranchExistsError (or the same failure).
   */
  async function pushBranches(calls: PushCall[]): Promise<Array<Settled<void>>> {
    const [{ repo, dir }] = calls as [PushCall];
    const unique = new Map<string, PushCall>();
    for (const call of calls) if (!unique.has(call.branch)) unique.set(call.branch, call);
    const targets = [...unique.values()].map((call) => ({ ...call, ref: `refs/heads/${call.branch}` }));
    const args = [
      `--git-dir=${dir}`,
      'push',
      '--porcelain',
      '--no-verify',
      ...targets.map((t) => `--force-with-lease=${t.ref}:`),
      '--',
      repo.url,
      ...targets.map((t) => `${t.commit}:${t.ref}`),
    ];
    const result = await git(repo, args, { remote: true });
    const lines = new Map<string, string[]>();
    for (const fields of result.stdout
      .toString('utf8')
      .split('\n')
      .map((row) => row.split('\t'))) {
      const destination = fields.length >= 3 ? fields[1]?.split(':').at(-1) : undefined;
      if (destination) lines.set(destination, fields);
    }
    const verdicts = new Map<string, Settled<void>>();
    const unclear: typeof targets = [];
    for (const target of targets) {
      const line = lines.get(target.ref);
      if (!line) {
        verdicts.set(target.branch, { ok: false, error: failure(repo, args, result, { remote: true }) });
        continue;
      }
      const [flag, , summary = ''] = line;
      if (flag === '*') verdicts.set(target.branch, { ok: true, value: undefined });
      else if (flag === '=' || PUSH_REJECTED_BECAUSE_EXISTS.test(summary)) {
        verdicts.set(target.branch, { ok: false, error: new GitBranchExistsError(target.branch, repo.url) });
      } else unclear.push(target);
    }
    if (unclear.length > 0) {
      // Rejected for another reason, e.g. a concurrent creation seen by the server or a hook.
      const now = await lsRemote(
        repo,
        dir,
        unclear.map((t) => t.ref),
      ).catch(() => new Map<string, string>());
      for (const target of unclear) {
        const summary = lines.get(target.ref)?.[2] ?? '';
        verdicts.set(target.branch, {
          ok: false,
          error: now.has(target.ref)
            ? new GitBranchExistsError(target.branch, repo.url)
            : new GitCommandError(
                args.map((arg) => redact(arg, secretsOf(repo))),
                result.exitCode,
                redact(result.stderr, secretsOf(repo)),
                `push of ${target.ref} was rejected: ${redact(summary, secretsOf(repo))}`,
              ),
        });
      }
    }
    recordPushedBranches(
      repo,
      dir,
      targets.filter((t) => verdicts.get(t.branch)?.ok === true),
    );
    return calls.map((call): Settled<void> => {
      const verdict = verdicts.get(call.branch) ?? { ok: false, error: failure(repo, args, result) };
      if (unique.get(call.branch) === call || !verdict.ok) return verdict;
      return { ok: false, error: new GitBranchExistsError(call.branch, repo.url) };
    });
  }

  /** cutBranch's work; the ticket is used up when the cut joins a push. */
  async function cut(
    repoRef: RepoRef,
    baseRef: string,
    branch: string,
    ticket: BatchTicket | undefined,
  ): Promise<{ commit: string }> {
    assertRefName(baseRef);
    assertBranchName(branch);
    const repo = parseRepo(repoRef);
    const dir = await ensureMirror(repo);
    const targetRef = `refs/heads/${branch}`;
    let target: FetchTarget | null = { sha: baseRef, fullRef: null };
    if (!isFullSha(baseRef)) {
      // One round trip answers both "does the branch exist?" and "where is the base?". From a full
      // sha there is nothing to look up: the push's lease refuses an existing branch.
      const refs = await sharedLsRemote(batchKey(repo, dir), {
        repo,
        dir,
        patterns: [...lsRemotePatterns(baseRef), targetRef],
      });
      if (refs.has(targetRef)) throw new GitBranchExistsError(branch, repo.url);
      target = pick(refs, baseRef);
    }
    const commit = target ? await ensureCommit(repo, dir, target) : null;
    if (!commit) throw new GitRefNotFoundError(baseRef, repo.url);
    await sharedPush(batchKey(repo, dir), { repo, dir, commit, branch }, ticket);
    return { commit };
  }

  return {
    expectCut(repoRef: RepoRef): BatchTicket {
      const repo = parseRepo(repoRef);
      return sharedPush.expect(batchKey(repo, mirrorPaths(repo).dir));
    },

    async cutBranch(
      repoRef: RepoRef,
      baseRef: string,
      branch: string,
      ticket?: BatchTicket,
    ): Promise<{ commit: string }> {
      try {
        return await cut(repoRef, baseRef, branch, ticket);
      } finally {
        ticket?.(); // a cut that failed before its push will not come
      }
    },
  };
}
