// syncProjectManifest: reads singulacomp.yaml (or legacy singulacomp.toml) from the repository at a
// ref and replaces the project's templates with what it declares (R-IMG-1, R-SBX-4).
import { loadManifest } from '../../image/manifest';
import type { Db } from '../platform';
import { assertCanWriteProject } from '../auth/authz';
import { ManifestInvalidError, NotFoundError } from '../errors';
import type { GitService } from '../git/git';
import type { Principal } from '../auth/principal';
import type { ProjectService } from './projects';
import { repoRef, resolveProjectRef } from '../git/project-repo';
import { requireRefName } from '../validate';

export type ManifestService = ReturnType<typeof createManifestService>;

export function createManifestService(options: {
  db: Db;
  git: GitService;
  projects: ProjectService;
  encryptionKey: Buffer;
}) {
  const { db, git } = options;
  return {
    async sync(principal: Principal, input: { projectId: string; ref: string | null }) {
      const project = await options.projects.load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'projects:write');
      const ref = input.ref ? requireRefName(input.ref, ['input', 'ref']) : project.defaultBranch;
      const repo = repoRef(project, options.encryptionKey);
      const commit = await resolveProjectRef(git, repo, ref);
      if (!commit)
        throw new NotFoundError(`"${ref}" does not exist in the project's repository.`, ['input', 'ref']);
      const at = commit;
      const result = await loadManifest({ readFile: (path) => git.readFileAtRef(repo, at, path) });
      if (!result.ok) {
        const first = result.errors[0];
        throw new ManifestInvalidError(
          `The manifest has ${result.errors.length} problem(s); the first: ${first?.field.join('.')}: ${first?.message}`,
          result.errors,
          first ? first.field : null,
        );
      }
      const templates = result.manifest?.templates ?? [];
      const defaultSlug = result.manifest?.defaultSlug ?? null;
      const warningsFor = (index: number, slug: string) =>
        result.warnings.filter(
          (w) =>
            w.startsWith(`sandbox.templates.${index}.`) ||
            w.startsWith(`sandbox.templates[${index}]`) ||
            w.includes(`"${slug}"`),
        );
      const updated = await db.$transaction(async (tx) => {
        await tx.template.deleteMany({
          where: { projectId: project.id, slug: { notIn: templates.map((t) => t.slug) } },
        });
        for (const [index, template] of templates.entries()) {
          const data = {
            name: template.name,
            dockerfile: template.source.kind === 'dockerfile' ? template.source.path : null,
            image: template.source.kind === 'image' ? template.source.reference : null,
            cpu: template.spec.cpu,
            memoryGiB: template.spec.memoryGiB,
            diskGiB: template.spec.diskGiB,
            isDefault: template.slug === defaultSlug,
            warnings: warningsFor(index, template.slug),
          };
          await tx.template.upsert({
            where: { projectId_slug: { projectId: project.id, slug: template.slug } },
            create: { projectId: project.id, slug: template.slug, ...data },
            update: data,
          });
        }
        return tx.project.update({
          where: { id: project.id },
          data: { manifestCommit: commit, manifestSyncedAt: new Date() },
        });
      });
      return { project: updated, commit: at, warnings: result.warnings };
    },
  };
}
