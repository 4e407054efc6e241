// Projects and their secrets (R-AUTH-5).
import { realpathSync } from 'node:fs';
import { resolve, sep } from 'node:path';
import type { Project } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { assertCanReadProject, assertCanWriteProject, assertScope } from '../auth/authz';
import { encrypt } from '../auth/crypto';
import { ConflictError, NotFoundError, ReservedSecretNameError, ValidationError } from '../errors';
import { parseId } from '../ids';
import type { Principal } from '../auth/principal';
import { requireNoNul, requireRefName, requireText } from '../validate';
import { reservedSecretName } from './secret-names';

export interface CreateProjectInput {
  name: string;
  repositoryUrl: string;
  defaultBranch?: string | null;
  gitCredential?: string | null;
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
    if (!project || (principal.kind !== 'SANDBOX' && project.accountId !== principal.accountId)) {
      throw new NotFoundError('No project with that id in your account.', field);
    }
    assertCanReadProject(principal, project);
    return project;
  }

  return {
    load,

    async create(principal: Principal, input: CreateProjectInput): Promise<Project> {
      assertScope(principal, 'projects:write');
      const name = requireText(input.name, ['input', 'name'], { max: 100 });
      const repositoryUrl = validateRepositoryUrl(input.repositoryUrl, options.localRepositories);
      const defaultBranch = input.defaultBranch
        ? requireRefName(input.defaultBranch, ['input', 'defaultBranch'])
        : 'main';
      if (input.gitCredential != null && input.gitCredential.length > 4_096) {
        throw new ValidationError('gitCredential must be at most 4096 characters.', [
          'input',
          'gitCredential',
        ]);
      }
      const existing = await db.project.findUnique({
        where: { accountId_name: { accountId: principal.accountId, name } },
      });
      if (existing) throw new ConflictError(`A project named "${name}" already exists.`, ['input', 'name']);
      return db.project.create({
        data: {
          accountId: principal.accountId,
          name,
          repositoryUrl,
          defaultBranch,
          provider: input.provider ?? options.defaultProvider ?? 'LOCAL',
          gitCredentialEnc: input.gitCredential ? encrypt(options.encryptionKey, input.gitCredential) : null,
        },
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
