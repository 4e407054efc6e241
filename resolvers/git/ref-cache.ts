// Ref lookups against an upstream. Concurrent lookups of one upstream share one ls-remote; each batch
// starts after all its callers asked, so none of them sees an answer older than its question, unless
// it asks for one: resolveRef takes a maxAgeMs and answers from the remembered lookups that started
// at most that long ago. A push this service makes to the upstream forgets them (forgetRefs).
import { createHash } from 'node:crypto';
import { createKeyedBatcher } from '../batch';
import type { FetchTarget, Mirror } from './mirror';
import { assertRefName, isFullSha, type ParsedRepo, parseRepo, type RepoRef, refCandidates } from './refs';
import type { MirroredCommit, RefLookup } from './types';

export interface RefCacheOptions {
  mirror: Mirror;
  /** Milliseconds since the epoch, for the age of remembered answers. */
  now: () => number;
}

interface LsRemoteCall {
  repo: ParsedRepo;
  dir: string;
  patterns: string[];
}

/** Most ref lookups or branch cuts one git invocation carries. */
export const MAX_REFS_PER_CALL = 64;
const REMEMBERED_REFS_MAX = 10_000;

/** Batches share a git call only with callers of the same upstream and the same credential. */
export function batchKey(repo: ParsedRepo, dir: string): string {
  return `${dir}\0${createHash('sha256')
    .update(repo.credential ?? '')
    .digest('hex')}`;
}

/** The first candidate of `ref` present in an ls-remote listing; tags are peeled to their commit. */
export function pick(refs: Map<string, string>, ref: string): FetchTarget | null {
  for (const candidate of refCandidates(ref)) {
    const sha = refs.get(`${candidate}^{}`) ?? refs.get(candidate);
    if (sha) return { sha, fullRef: candidate };
  }
  return null;
}

export function lsRemotePatterns(ref: string): string[] {
  return refCandidates(ref).flatMap((candidate) =>
    candidate.startsWith('refs/tags/') ? [candidate, `${candidate}^{}`] : [candidate],
  );
}

export type RefCache = ReturnType<typeof createRefCache>;

export function createRefCache({ mirror, now }: RefCacheOptions) {
  const { ensureMirror, ensureCommit, lsRemote } = mirror;
  /**
   * Ref answers by batch key and ref name, with the time their lookup started: a burst of session
   * creates from one project's default branch asks the upstream once per window, not once per batch.
   */
  const resolvedRefs = new Map<string, { sha: string; askedAt: number }>();
  const forgottenAt = new Map<string, number>();

  const sharedLsRemote = createKeyedBatcher<LsRemoteCall, Map<string, string>>(
    async (_key, calls) => {
      const [first] = calls as [LsRemoteCall];
      const refs = await lsRemote(first.repo, first.dir, [...new Set(calls.flatMap((c) => c.patterns))]);
      return calls.map(() => ({ ok: true, value: refs }));
    },
    { maxBatch: MAX_REFS_PER_CALL },
  );

  /** Resolves `ref` to a fetch target: ls-remote for names, the sha itself for full shas. */
  async function resolveTarget(repo: ParsedRepo, dir: string, ref: string): Promise<FetchTarget | null> {
    if (isFullSha(ref)) return { sha: ref, fullRef: null };
    return pick(
      await sharedLsRemote(batchKey(repo, dir), { repo, dir, patterns: lsRemotePatterns(ref) }),
      ref,
    );
  }

  async function fetchRefParsed(repo: ParsedRepo, ref: string): Promise<MirroredCommit | null> {
    assertRefName(ref);
    const dir = await ensureMirror(repo);
    const target = await resolveTarget(repo, dir, ref);
    if (!target) return null;
    const commit = await ensureCommit(repo, dir, target);
    return commit ? { commit, mirrorDir: dir } : null;
  }

  /**
   * Forgets every remembered ref answer of the mirror `dir` (any credential); an answer whose lookup
   * started before this moment is not remembered when it arrives later.
   */
  function forgetRefs(dir: string): void {
    forgottenAt.set(dir, now());
    for (const key of resolvedRefs.keys()) if (key.startsWith(`${dir}\0`)) resolvedRefs.delete(key);
  }

  function rememberRef(dir: string, key: string, sha: string, askedAt: number): void {
    if (askedAt <= (forgottenAt.get(dir) ?? Number.NEGATIVE_INFINITY)) return;
    if (resolvedRefs.size >= REMEMBERED_REFS_MAX) resolvedRefs.clear();
    resolvedRefs.set(key, { sha, askedAt });
  }

  async function resolveRef(repoRef: RepoRef, ref: string, lookup: RefLookup = {}): Promise<string | null> {
    assertRefName(ref);
    const repo = parseRepo(repoRef);
    const dir = await ensureMirror(repo);
    const maxAgeMs = lookup.maxAgeMs ?? 0;
    const key = `${batchKey(repo, dir)}\0${ref}`;
    const askedAt = now();
    if (maxAgeMs > 0 && !isFullSha(ref)) {
      const remembered = resolvedRefs.get(key);
      if (remembered && askedAt - remembered.askedAt <= maxAgeMs) return remembered.sha;
    }
    const target = await resolveTarget(repo, dir, ref);
    if (!target) return null;
    // A bare sha is only known to exist upstream once it is fetched.
    if (target.fullRef === null) return ensureCommit(repo, dir, target);
    rememberRef(dir, key, target.sha, askedAt);
    return target.sha;
  }

  return { sharedLsRemote, resolveTarget, fetchRef: fetchRefParsed, resolveRef, forgetRefs };
}
