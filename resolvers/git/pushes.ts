// Pushes of commits present in the mirror to the upstream (change requests, the git proxy), with the
// server-held credential and a lease per ref.
import { redact } from './errors';
import type { Mirror } from './mirror';
import type { RefCache } from './ref-cache';
import { assertRefName, parseRepo, type RepoRef } from './refs';
import type { RefUpdate, RefUpdateResult } from './types';

/** receive-pack for pushes into local repositories (see pushToUpstream). */
const UPDATE_INSTEAD_RECEIVE_PACK = 'git -c receive.denyCurrentBranch=updateInstead receive-pack';

function isLocalUrl(url: string): boolean {
  return url.startsWith('/') || url.startsWith('file://');
}

export function createPushes({ mirror, refs }: { mirror: Mirror; refs: RefCache }) {
  const { git, failure, secretsOf, ensureMirror } = mirror;
  const { forgetRefs } = refs;

  return {
    async pushToUpstream(repoRef: RepoRef, updates: readonly RefUpdate[]): Promise<RefUpdateResult[]> {
      if (updates.length === 0) return [];
      const repo = parseRepo(repoRef);
      const dir = await ensureMirror(repo);
      for (const update of updates) assertRefName(update.ref);
      // Whatever the push does, remembered answers may now be stale: forget them before and after.
      forgetRefs(dir);
      const args = [
        `--git-dir=${dir}`,
        'push',
        '--porcelain',
        '--no-verify',
        // A local repository may be an ordinary one with the branch checked out (the usual case in
        // development): update its branch and, when its work tree is clean, the work tree too, as
        // git's receive.denyCurrentBranch=updateInstead does; a dirty work tree refuses the push.
        // Bare repositories ignore the setting.
        ...(isLocalUrl(repo.url) ? [`--receive-pack=${UPDATE_INSTEAD_RECEIVE_PACK}`] : []),
        ...(updates.length > 1 ? ['--atomic'] : []),
        ...updates.map((u) => `--force-with-lease=${u.ref}:${u.oldSha ?? ''}`),
        '--',
        repo.url,
        ...updates.map((u) => `${u.newSha}:${u.ref}`),
      ];
      const result = await git(repo, args, { remote: true });
      forgetRefs(dir);
      const lines = result.stdout
        .toString('utf8')
        .split('\n')
        .map((row) => row.split('\t'));
      const secrets = secretsOf(repo);
      const results = updates.map((update): RefUpdateResult | null => {
        const line = lines.find((fields) => fields.length >= 3 && fields[1]?.endsWith(`:${update.ref}`));
        if (!line) return null;
        const [flag, , summary = ''] = line;
        const ok = flag !== '!';
        return { ref: update.ref, ok, reason: ok ? null : redact(summary, secrets) };
      });
      // No porcelain line for a ref: the push never got that far (unreachable, auth, timeout).
      if (results.some((r) => r === null)) throw failure(repo, args, result, { remote: true });
      return results as RefUpdateResult[];
    },
  };
}
