// syncProjectManifest: reads singulacomp.yaml (or legacy singulacomp.toml) from the repository at a
// ref and replaces the project's templates with what it declares (R-IMG-1, R-SBX-4). A manifest read
// at an older commit of the default branch is stale: a session create re-reads it (refreshIfStale).
import type { Db, Logger } from '../platform';
import { assertCanWriteProject } from '../auth/authz';
import { NotFoundError } from '../errors';
import type { GitService } from '../git/git';
import type { Principal } from '../auth/principal';
import type { ProjectService } from './projects';
import { repoRef, resolveProjectRef } from '../git/project-repo';
import { requireRefName } from '../validate';
import { readManifestAt, writeTemplates } from './manifest-read';

export type ManifestService = ReturnType<typeof createManifestService>;

export function createManifestService(options: {
  db: Db;
  git: GitService;
  projects: ProjectService;
  encryptionKey: Buffer;
  logger?: Logger;
}) {
  const { db, git } = options;
  const log = options.logger?.child({ module: 'manifests' });
  /** Refreshes in flight per project, so a burst of creates reads a moved manifest once. */
  const refreshing = new Map<string, Promise<boolean>>();

  return {
    async sync(principal: Principal, input: { projectId: string; ref: string | null }) {
      const project = await options.projects.load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'projects:write');
      const ref = input.ref ? requireRefName(input.ref, ['input', 'ref']) : project.defaultBranch;
      const repo = repoRef(project, options.encryptionKey);
      const commit = await resolveProjectRef(git, repo, ref);
      if (!commit)
        throw new NotFoundError(`"${ref}" does not exist in the project's repository.`, ['input', 'ref']);
      const read = await readManifestAt(git, repo, commit);
      const updated = await db.$transaction((tx) => writeTemplates(tx, project.id, read));
      return { project: updated, commit, warnings: read.result.warnings };
    },

    /**
     * Re-reads the manifest when the default branch has moved (now at `commit`) since the project's
     * manifest was read. Only for projects whose manifest was read at all (one created through the API
     * always is); an invalid manifest upstream keeps the templates as they were, with a warning logged.
     */
    async refreshIfStale(
      project: { id: string; repositoryUrl: string; gitCredentialEnc: string | null },
      manifestCommit: string | null,
      commit: string,
    ): Promise<boolean> {
      if (manifestCommit === null || manifestCommit === commit) return false;
      const key = `${project.id}:${commit}`;
      const pending = refreshing.get(key);
      if (pending) return pending;
      const run = (async () => {
        const repo = repoRef(project, options.encryptionKey);
        try {
          const read = await readManifestAt(git, repo, commit);
          await db.$transaction(async (tx) => {
            // Another process may have read a newer commit meanwhile: only a still-stale row moves.
            const { count } = await tx.project.updateMany({
              where: { id: project.id, manifestCommit },
              data: { manifestCommit: commit },
            });
            if (count === 1) await writeTemplates(tx, project.id, read);
          });
          log?.info({ projectId: project.id, commit }, 'manifest re-read: the default branch moved');
          return true;
        } catch (error) {
          log?.warn(
            { projectId: project.id, commit, err: error },
            'manifest re-read failed; the templates stay as they were',
          );
          return false;
        }
      })().finally(() => refreshing.delete(key));
      refreshing.set(key, run);
      return run;
    },
  };
}
