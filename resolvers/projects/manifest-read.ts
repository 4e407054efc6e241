// Reading a project's manifest at a commit and writing the templates it declares: shared by
// createProject, updateProject, syncProjectManifest and the stale-manifest refresh of a session create.
import { loadManifest } from '../../image/manifest';
import type { Prisma, Project } from '../../prisma/generated/client/client';
import { ManifestInvalidError } from '../errors';
import type { GitService, RepoRef } from '../git/git';

type ManifestResult = Awaited<ReturnType<typeof loadManifest>>;
type ValidManifest = Extract<ManifestResult, { ok: true }>;

/** A valid manifest read at `commit` (no manifest file: no templates). */
export interface ManifestAtCommit {
  commit: string;
  result: ValidManifest;
}

/** Reads the manifest at `commit`; an invalid one is a ManifestInvalidError listing every problem. */
export async function readManifestAt(
  git: GitService,
  repo: RepoRef,
  commit: string,
): Promise<ManifestAtCommit> {
  const result = await loadManifest({ readFile: (path) => git.readFileAtRef(repo, commit, path) });
  if (!result.ok) {
    const first = result.errors[0];
    throw new ManifestInvalidError(
      `The manifest has ${result.errors.length} problem(s); the first: ${first?.field.join('.')}: ${first?.message}`,
      result.errors,
      first ? first.field : null,
    );
  }
  return { commit, result };
}

type Tx = Prisma.TransactionClient;

/** Replaces the project's templates with the manifest's and records the commit it was read at. */
export async function writeTemplates(tx: Tx, projectId: string, read: ManifestAtCommit): Promise<Project> {
  const { result } = read;
  const templates = result.manifest?.templates ?? [];
  const defaultSlug = result.manifest?.defaultSlug ?? null;
  const warningsFor = (index: number, slug: string) =>
    result.warnings.filter(
      (w) =>
        w.startsWith(`sandbox.templates.${index}.`) ||
        w.startsWith(`sandbox.templates[${index}]`) ||
        w.includes(`"${slug}"`),
    );
  await tx.template.deleteMany({
    where: { projectId, slug: { notIn: templates.map((t) => t.slug) } },
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
      where: { projectId_slug: { projectId, slug: template.slug } },
      create: { projectId, slug: template.slug, ...data },
      update: data,
    });
  }
  return tx.project.update({
    where: { id: projectId },
    data: { manifestCommit: read.commit, manifestSyncedAt: new Date() },
  });
}
