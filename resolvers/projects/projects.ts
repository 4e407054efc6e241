// Projects and their secrets (R-AUTH-5).
import { realpathSync } from 'node:fs';
import { resolve, sep } from 'node:path';
import type { Project } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { assertCanReadProject, assertCanWriteProject, assertScope } from '../auth/authz';
import { decrypt, encrypt } from '../auth/crypto';
import {
  ConflictError,
  ManifestInvalidError,
  NotFoundError,
  RepositoryUnreachableError,
  ReservedSecretNameError,
  ValidationError,
} from '../errors';
import type { GitService, RepoRef } from '../git/git';
import { LIVE_SESSION_STATUSES } from '../accounts/limits';
import { parseId } from '../ids';
import type { Principal } from '../auth/principal';
import { authorize, reachOf } from '../auth/policy';
import { requireNoNul, requireRefName, requireText } from '../validate';
import { type ManifestAtCommit, readManifestAt, writeTemplates } from './manifest-read';
import { reservedSecretName } from './secret-names';

export interface CreateProjectInput {
  name: string;
  repositoryUrl: string;
  defaultBranch?: string | null;
  gitCredential?: string | null;
  provider?: 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER' | null;
}

/** Fields left out (or null) stay as they are; `clearGitCredential` removes the stored credential. */
export interface UpdateProjectInput {
  projectId: string;
  name?: string | null;
  repositoryUrl?: string | null;
  defaultBranch?: string | null;
  gitCredential?: string | null;
  clearGitCredential?: boolean | null;
  provider?: 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER' | null;
}

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const MAX_SECRET_BYTES = 64 * 1024;

/** Local filesystem repositories: allowed per instance, never inside the server's data dir. */
export interface LocalRepositoryPolicy {
  allowed: boolean;
  dataDir: string;
}

function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

function assertLocalRepositoryAllowed(url: string, policy: LocalRepositoryPolicy | undefined): void {
  const local = url.startsWith('/')
    ? url
    : url.startsWith('file://')
      ? decodeURIComponent(new URL(url).pathname)
      : null;
  if (local === null || !policy) return;
  if (!policy.allowed) {
    throw new ValidationError(
      'Local filesystem repositories are disabled on this instance (SINGULACOMP_ALLOW_LOCAL_REPOSITORIES); use an https:// or ssh:// URL.',
      ['input', 'repositoryUrl'],
    );
  }
  const path = realPath(local);
  const dataDir = realPath(policy.dataDir);
  if (path === dataDir || path.startsWith(`${dataDir}${sep}`)) {
    throw new ValidationError('repositoryUrl cannot point into the server’s data directory.', [
      'input',
      'repositoryUrl',
    ]);
  }
}

function validateRepositoryUrl(value: string, policy?: LocalRepositoryPolicy): string {
  const url = requireText(value, ['input', 'repositoryUrl'], { max: 2_048 });
  const ok =
    /^(https?|ssh|git|file):\/\/[^\s]+$/.test(url) ||
    /^[\w.-]+@[\w.-]+:[^\s]+$/.test(url) ||
    url.startsWith('/');
  if (!ok || url.includes('\0')) {
    throw new ValidationError(
      'repositoryUrl must be an https://, ssh://, git@host:path, file:// URL or an absolute local path.',
      ['input', 'repositoryUrl'],
    );
  }
  if (/^https?:\/\/[^/]*@/.test(url)) {
    throw new ValidationError('Put credentials in gitCredential, not in the URL.', [
      'input',
      'repositoryUrl',
    ]);
  }
  assertLocalRepositoryAllowed(url, policy);
  return url;
}

export type ProjectService = ReturnType<typeof createProjectService>;

export function createProjectService(options: {
  db: Db;
  /** Reads the manifest on create and on a repository or branch change. */
  git: GitService;
  encryptionKey: Buffer;
  /** Provider for projects created without one (SINGULACOMP_DEFAULT_PROVIDER). @default 'LOCAL' */
  defaultProvider?: 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER';
  /** Unset: local paths allowed anywhere (tests that build a service alone). */
  localRepositories?: LocalRepositoryPolicy;
}) {
  const { db } = options;

  async function load(principal: Principal, id: string, field: string[]): Promise<Project> {
    const projectId = parseId(id, 'Project', field);
    const project = await db.project.findUnique({ where: { id: projectId } });
    const reach = reachOf(principal);
    if (!project || (reach.kind === 'account' && project.accountId !== reach.accountId)) {
      throw new NotFoundError('No project with that id in your account.', field);
    }
    assertCanReadProject(principal, project);
    return project;
  }

  function validCredential(value: string | null | undefined): string | null {
    if (value == null || value === '') return null;
    if (value.length > 4_096) {
      throw new ValidationError('gitCredential must be at most 4096 characters.', ['input', 'gitCredential']);
    }
    return value;
  }

  async function assertNameFree(accountId: string, name: string, exceptId: string | null): Promise<void> {
    const existing = await db.project.findUnique({ where: { accountId_name: { accountId, name } } });
    if (existing && existing.id !== exceptId) {
      throw new ConflictError(`A project named "${name}" already exists.`, ['input', 'name']);
    }
  }

  /**
   * The manifest at the head of the default branch. Without a branch given: `main`, else the branch
   * the repository's HEAD names (a repository made by an older `git init` has `master`).
   */
  async function readManifestOf(
    repo: RepoRef,
    givenBranch: string | null,
  ): Promise<{ branch: string; read: ManifestAtCommit }> {
    const field = givenBranch ? ['input', 'defaultBranch'] : ['input', 'repositoryUrl'];
    try {
      let branch = givenBranch ?? 'main';
      let commit = await options.git.resolveRef(repo, branch);
      if (!commit && !givenBranch) {
        const head = await options.git.defaultBranch(repo);
        if (head) {
          branch = head;
          commit = await options.git.resolveRef(repo, branch);
        }
      }
      if (!commit) {
        throw new ValidationError(
          givenBranch
            ? `Branch "${givenBranch}" does not exist in the repository; push it first or name another defaultBranch.`
            : 'The repository has no commits yet; push a first commit, then create the project.',
          field,
        );
      }
      return { branch, read: await readManifestAt(options.git, repo, commit) };
    } catch (error) {
      if (error instanceof ValidationError || error instanceof ManifestInvalidError) throw error;
      throw new RepositoryUnreachableError(
        `Cannot read the repository: ${(error as Error).message.slice(0, 500)}. Check repositoryUrl and gitCredential.`,
        ['input', 'repositoryUrl'],
      );
    }
  }

  return {
    load,

    /** Query.project: the row by id or null; its read check is the Project node's (schema readAuth). */
    find<Q extends object>(id: string, query?: Q) {
      return db.project.findUnique({ ...(query ?? {}), where: { id } });
    },

    /**
     * viewer.projects: the account's projects, newest first; a sandbox token sees its own project,
     * any other caller needs projects:read. `query` is the GraphQL selection (cursor and page included).
     */
    listForViewer<Q extends object>(principal: Principal, query?: Q) {
      const reach = reachOf(principal);
      if (reach.kind === 'account') authorize(principal, 'api.scope', { scope: 'projects:read' });
      return db.project.findMany({
        ...(query ?? {}),
        where: {
          accountId: principal.accountId,
          ...(reach.kind === 'session' ? { id: reach.projectId } : {}),
        },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
    },

    /**
     * Creates a project with its manifest already read: the repository must be readable and its
     * default branch must exist (an invalid manifest refuses the create with every problem listed).
     */
    async create(principal: Principal, input: CreateProjectInput): Promise<Project> {
      assertScope(principal, 'projects:write');
      const name = requireText(input.name, ['input', 'name'], { max: 100 });
      const repositoryUrl = validateRepositoryUrl(input.repositoryUrl, options.localRepositories);
      const givenBranch = input.defaultBranch
        ? requireRefName(input.defaultBranch, ['input', 'defaultBranch'])
        : null;
      const gitCredential = validCredential(input.gitCredential);
      await assertNameFree(principal.accountId, name, null);
      const repo: RepoRef = { url: repositoryUrl, credential: gitCredential };
      const { branch, read } = await readManifestOf(repo, givenBranch);
      return db.$transaction(async (tx) => {
        const project = await tx.project.create({
          data: {
            accountId: principal.accountId,
            name,
            repositoryUrl,
            defaultBranch: branch,
            provider: input.provider ?? options.defaultProvider ?? 'LOCAL',
            gitCredentialEnc: gitCredential ? encrypt(options.encryptionKey, gitCredential) : null,
          },
        });
        return writeTemplates(tx, project.id, read);
      });
    },

    /**
     * Changes a project's name, repository, default branch, credential or provider. A new repository,
     * branch or credential is read at once, as on create: templates follow its manifest.
     */
    async update(principal: Principal, input: UpdateProjectInput): Promise<Project> {
      const project = await load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'projects:write');
      const name =
        input.name != null ? requireText(input.name, ['input', 'name'], { max: 100 }) : project.name;
      if (name !== project.name) await assertNameFree(project.accountId, name, project.id);
      const repositoryUrl =
        input.repositoryUrl != null
          ? validateRepositoryUrl(input.repositoryUrl, options.localRepositories)
          : project.repositoryUrl;
      const defaultBranch =
        input.defaultBranch != null
          ? requireRefName(input.defaultBranch, ['input', 'defaultBranch'])
          : project.defaultBranch;
      if (input.clearGitCredential && input.gitCredential != null) {
        throw new ValidationError('Give gitCredential or clearGitCredential, not both.', [
          'input',
          'clearGitCredential',
        ]);
      }
      const newCredential = validCredential(input.gitCredential);
      const gitCredentialEnc = input.clearGitCredential
        ? null
        : newCredential
          ? encrypt(options.encryptionKey, newCredential)
          : project.gitCredentialEnc;
      const credential = gitCredentialEnc ? decrypt(options.encryptionKey, gitCredentialEnc) : null;
      const reread =
        repositoryUrl !== project.repositoryUrl ||
        defaultBranch !== project.defaultBranch ||
        gitCredentialEnc !== project.gitCredentialEnc;
      const read = reread
        ? (await readManifestOf({ url: repositoryUrl, credential }, defaultBranch)).read
        : null;
      return db.$transaction(async (tx) => {
        const updated = await tx.project.update({
          where: { id: project.id },
          data: {
            name,
            repositoryUrl,
            defaultBranch,
            gitCredentialEnc,
            ...(input.provider ? { provider: input.provider } : {}),
          },
        });
        return read ? writeTemplates(tx, project.id, read) : updated;
      });
    },

    /**
     * Deletes a project with its templates, secrets, triggers, change requests and stopped sessions.
     * Refused while a session of it is live (stop them first); the upstream repository is untouched.
     */
    async remove(principal: Principal, input: { projectId: string }): Promise<Project> {
      const project = await load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'projects:write');
      return db.$transaction(async (tx) => {
        // The row lock orders this against a create admitting a session of the project.
        await tx.$queryRaw`SELECT 1 FROM "Project" WHERE "id" = ${project.id}::uuid FOR UPDATE`;
        const live = await tx.session.count({
          where: { projectId: project.id, status: { in: [...LIVE_SESSION_STATUSES] } },
        });
        if (live > 0) {
          throw new ConflictError(`The project has ${live} live session(s); stop them before deleting it.`, [
            'input',
            'projectId',
          ]);
        }
        return tx.project.delete({ where: { id: project.id } });
      });
    },

    async setSecret(
      principal: Principal,
      input: { projectId: string; name: string; value: string; runtimeDelivery?: boolean | null },
    ) {
      const project = await load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'secrets:write');
      const reserved = reservedSecretName(input.name);
      if (reserved) {
        throw new ReservedSecretNameError(
          /^SINGULACOMP_/i.test(input.name)
            ? 'The SINGULACOMP_ prefix is reserved for platform variables; choose another name.'
            : `"${input.name.slice(0, 128)}" cannot be a secret name: ${reserved}. Choose another name.`,
          ['input', 'name'],
        );
      }
      const name = requireText(input.name, ['input', 'name'], {
        max: 128,
        pattern: SECRET_NAME,
        hint: 'Secret names are environment variable names: letters, digits and "_", not starting with a digit.',
      });
      if (Buffer.byteLength(input.value) > MAX_SECRET_BYTES) {
        throw new ValidationError('Secret values are limited to 64 KiB.', ['input', 'value']);
      }
      const valueEnc = encrypt(options.encryptionKey, input.value);
      const runtimeDelivery = input.runtimeDelivery ?? false;
      return db.projectSecret.upsert({
        where: { projectId_name: { projectId: project.id, name } },
        create: { projectId: project.id, name, valueEnc, runtimeDelivery },
        update: { valueEnc, runtimeDelivery },
      });
    },

    async deleteSecret(principal: Principal, input: { projectId: string; name: string }) {
      const project = await load(principal, input.projectId, ['input', 'projectId']);
      assertCanWriteProject(principal, project, 'secrets:write');
      const { count } = await db.projectSecret.deleteMany({
        where: { projectId: project.id, name: requireNoNul(input.name, ['input', 'name']).slice(0, 200) },
      });
      if (count === 0) throw new NotFoundError(`No secret named "${input.name}".`, ['input', 'name']);
      return project;
    },
  };
}
