// A project's repository as the git service takes it: the URL and the decrypted credential. Here, not
// in sessions/, so projects, snapshots and the git proxy reach it without depending on sessions.
import { decrypt } from '../auth/crypto';
import { RepositoryUnreachableError } from '../errors';
import type { RepoRef } from './refs';
import type { GitService, RefLookup } from './types';

export function repoRef(
  project: { repositoryUrl: string; gitCredentialEnc: string | null },
  encryptionKey: Buffer,
): RepoRef {
  return {
    url: project.repositoryUrl,
    credential: project.gitCredentialEnc ? decrypt(encryptionKey, project.gitCredentialEnc) : null,
  };
}

/** The commit `ref` names in the project's repository (null: no such ref); unreachable → typed error. */
export async function resolveProjectRef(
  git: GitService,
  repo: RepoRef,
  ref: string,
  lookup?: RefLookup,
): Promise<string | null> {
  try {
    return await git.resolveRef(repo, ref, lookup);
  } catch (error) {
    throw new RepositoryUnreachableError(
      `Cannot read the project's repository: ${(error as Error).message}`,
      ['input', 'projectId'],
    );
  }
}
