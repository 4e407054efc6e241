// Project, ProjectSecret, Template, Snapshot; project query; project mutations.
import {
  ManifestInvalidError,
  RepositoryUnreachableError,
  ReservedSecretNameError,
} from '../resolvers/errors';
import { tryParseId } from '../resolvers/ids';
import { assertCanReadProject } from '../resolvers/auth/authz';
import { nodeAccessOf } from '../resolvers/auth/node-access';
import { badUserInput } from '../resolvers/errors';
import { encodeGlobalID } from '@pothos/plugin-relay';
import type { Project } from '../prisma/generated/client/client';
import { builder, successType } from './builder';
import { ProviderEnum, SnapshotStatusEnum } from './enums';
import { COMMON_ERRORS } from './errors';

export const ProjectRef = builder.prismaNode('Project', {
  id: { field: 'id' },
  readAuth: (project, ctx) => {
    if (!ctx.principal) return false;
    assertCanReadProject(ctx.principal, project);
    return true;
  },
  fields: (t) => ({
    projectId: t.exposeString('id', { description: 'The raw UUID.' }),
    name: t.exposeString('name'),
    repositoryUrl: t.exposeString('repositoryUrl'),
    defaultBranch: t.exposeString('defaultBranch'),
    provider: t.expose('provider', { type: ProviderEnum }),
    hasGitCredential: t.boolean({ resolve: (p) => p.gitCredentialEnc !== null }),
    manifestCommit: t.exposeString('manifestCommit', { nullable: true }),
    manifestSyncedAt: t.expose('manifestSyncedAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    templates: t.relation('templates', { query: { orderBy: { slug: 'asc' } } }),
    secrets: t.relation('secrets', {
      description: 'Names and flags only; values are write-only.',
      query: { orderBy: { name: 'asc' } },
    }),
    sessions: t.relatedConnection(
      'sessions',
      {
        cursor: 'id',
        defaultSize: 20,
        maxSize: 100,
        description: "The project's sessions, newest first (needs sessions:read).",
        authScopes: { scope: 'sessions:read' },
        query: { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] },
      },
      { name: 'ProjectSessionConnection' },
      { name: 'ProjectSessionEdge' },
    ),
  }),
});

builder.prismaObject('ProjectSecret', {
  description: 'A project secret. The value is write-only and never returned.',
  fields: (t) => ({
    name: t.exposeString('name'),
    runtimeDelivery: t.exposeBoolean('runtimeDelivery'),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

builder.prismaNode('Template', {
  id: { field: 'id' },
  readAuth: (template, ctx) => {
    const access = nodeAccessOf(ctx);
    if (!access) return false;
    // Synchronous once the owner is known: no Promise per template of a page.
    return access.template(template)?.then(() => true) ?? true;
  },
  fields: (t) => ({
    slug: t.exposeString('slug'),
    name: t.exposeString('name'),
    dockerfile: t.exposeString('dockerfile', { nullable: true }),
    image: t.exposeString('image', { nullable: true }),
    cpu: t.exposeInt('cpu'),
    memoryGiB: t.exposeInt('memoryGiB'),
    diskGiB: t.exposeInt('diskGiB'),
    isDefault: t.exposeBoolean('isDefault'),
    warnings: t.exposeStringList('warnings'),
    provider: t.expose('provider', { type: ProviderEnum, nullable: true }),
    snapshot: t.relation('snapshot', { nullable: true }),
  }),
});

builder.prismaNode('Snapshot', {
  id: { field: 'id' },
  readAuth: async (snapshot, ctx) => {
    const access = nodeAccessOf(ctx);
    if (!access) return false;
    await access.snapshot(snapshot);
    return true;
  },
  fields: (t) => ({
    key: t.exposeString('key'),
    status: t.expose('status', { type: SnapshotStatusEnum }),
    provider: t.expose('provider', { type: ProviderEnum }),
    runtimeVersion: t.exposeString('runtimeVersion'),
    error: t.exposeString('error', { nullable: true }),
    buildLog: t.exposeString('buildLog', {
      nullable: true,
      description: "The image builder's output (its last 16 KiB), updated while the build runs.",
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    builtAt: t.expose('builtAt', { type: 'DateTime', nullable: true }),
  }),
});

builder.queryField('project', (t) =>
  t.prismaField({
    type: 'Project',
    nullable: true,
    authScopes: { authenticated: true },
    args: { id: t.arg.id() },
    resolve: async (query, _root, args, ctx) => {
      const id = tryParseId(String(args.id), 'Project');
      if (!id) throw badUserInput('Not a valid Project id.', ['id']);
      return ctx.services.projects.find(id, query);
    },
  }),
);

const CreateProjectInput = builder.inputType('CreateProjectInput', {
  fields: (t) => ({
    name: t.string(),
    repositoryUrl: t.string({ description: 'Any git URL or an absolute local path.' }),
    defaultBranch: t.string({ required: false }),
    gitCredential: t.string({
      required: false,
      description: 'Upstream token, stored encrypted server-side.',
    }),
    provider: t.field({ type: ProviderEnum, required: false }),
  }),
});

const CreateProjectSuccess = successType('CreateProjectSuccess', 'project', ProjectRef);

builder.mutationField('createProject', (t) =>
  t.field({
    type: CreateProjectSuccess,
    description:
      "Creates a project and reads its manifest at once: the templates are there on success; an invalid manifest is a ManifestInvalidError listing every problem, and an unreadable repository a RepositoryUnreachableError (nothing is created). Without defaultBranch: `main`, else the branch the repository's HEAD names.",
    authScopes: { human: true },
    errors: { types: [...COMMON_ERRORS, ManifestInvalidError, RepositoryUnreachableError] },
    args: { input: t.arg({ type: CreateProjectInput }) },
    resolve: async (_root, { input }, ctx) => ({
      project: await ctx.services.projects.create(ctx.principal!, input),
    }),
  }),
);

const UpdateProjectInput = builder.inputType('UpdateProjectInput', {
  fields: (t) => ({
    projectId: t.id(),
    name: t.string({ required: false }),
    repositoryUrl: t.string({ required: false, description: 'Any git URL or an absolute local path.' }),
    defaultBranch: t.string({ required: false }),
    gitCredential: t.string({ required: false, description: 'Replaces the stored upstream token.' }),
    clearGitCredential: t.boolean({ required: false, description: 'Removes the stored upstream token.' }),
    provider: t.field({ type: ProviderEnum, required: false }),
  }),
});

const UpdateProjectSuccess = successType('UpdateProjectSuccess', 'project', ProjectRef);

builder.mutationField('updateProject', (t) =>
  t.field({
    type: UpdateProjectSuccess,
    description:
      'Changes the fields given (others stay). A new repository, default branch or credential is read at once, as on create: the templates follow its manifest.',
    authScopes: { human: true },
    errors: { types: [...COMMON_ERRORS, ManifestInvalidError, RepositoryUnreachableError] },
    args: { input: t.arg({ type: UpdateProjectInput }) },
    resolve: async (_root, { input }, ctx) => ({
      project: await ctx.services.projects.update(ctx.principal!, {
        ...input,
        projectId: String(input.projectId),
      }),
    }),
  }),
);

const DeleteProjectInput = builder.inputType('DeleteProjectInput', {
  fields: (t) => ({ projectId: t.id() }),
});

const DeleteProjectSuccess = builder.objectRef<{ projectId: string }>('DeleteProjectSuccess').implement({
  fields: (t) => ({
    projectId: t.id({
      description: 'The deleted project’s node id.',
      resolve: (p) => encodeGlobalID('Project', p.projectId),
    }),
  }),
});

builder.mutationField('deleteProject', (t) =>
  t.field({
    type: DeleteProjectSuccess,
    description:
      'Deletes a project with its templates, secrets, triggers, change requests and ended sessions; a ConflictError while a session of it is live. The upstream repository is untouched.',
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteProjectInput }) },
    resolve: async (_root, { input }, ctx) => ({
      projectId: (await ctx.services.projects.remove(ctx.principal!, { projectId: String(input.projectId) }))
        .id,
    }),
  }),
);

const SetSecretInput = builder.inputType('SetSecretInput', {
  fields: (t) => ({
    projectId: t.id(),
    name: t.string(),
    value: t.string(),
    runtimeDelivery: t.boolean({ required: false, description: 'Deliver into sandboxes. Default false.' }),
  }),
});

const SecretRef = builder.objectRef<{ name: string; runtimeDelivery: boolean; updatedAt: Date }>('Secret');
SecretRef.implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    runtimeDelivery: t.exposeBoolean('runtimeDelivery'),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const SetSecretSuccess = successType('SetSecretSuccess', 'secret', SecretRef);

builder.mutationField('setSecret', (t) =>
  t.field({
    type: SetSecretSuccess,
    authScopes: { human: true },
    errors: { types: [...COMMON_ERRORS, ReservedSecretNameError] },
    args: { input: t.arg({ type: SetSecretInput }) },
    resolve: async (_root, { input }, ctx) => ({
      secret: await ctx.services.projects.setSecret(ctx.principal!, {
        ...input,
        projectId: String(input.projectId),
      }),
    }),
  }),
);

const DeleteSecretInput = builder.inputType('DeleteSecretInput', {
  fields: (t) => ({ projectId: t.id(), name: t.string() }),
});

const DeleteSecretSuccess = builder
  .objectRef<{ project: Project; deletedName: string }>('DeleteSecretSuccess')
  .implement({
    fields: (t) => ({
      project: t.field({ type: ProjectRef, resolve: (p) => p.project }),
      deletedName: t.exposeString('deletedName'),
    }),
  });

builder.mutationField('deleteSecret', (t) =>
  t.field({
    type: DeleteSecretSuccess,
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteSecretInput }) },
    resolve: async (_root, { input }, ctx) => ({
      project: await ctx.services.projects.deleteSecret(ctx.principal!, {
        ...input,
        projectId: String(input.projectId),
      }),
      deletedName: input.name,
    }),
  }),
);

const SyncProjectManifestInput = builder.inputType('SyncProjectManifestInput', {
  fields: (t) => ({
    projectId: t.id(),
    ref: t.string({ required: false, description: 'Branch, tag or commit; default: the default branch.' }),
  }),
});

const SyncProjectManifestSuccess = builder
  .objectRef<{ project: Project; commit: string; warnings: string[] }>('SyncProjectManifestSuccess')
  .implement({
    fields: (t) => ({
      project: t.field({ type: ProjectRef, resolve: (p) => p.project }),
      commit: t.exposeString('commit'),
      warnings: t.exposeStringList('warnings'),
    }),
  });

builder.mutationField('syncProjectManifest', (t) =>
  t.field({
    type: SyncProjectManifestSuccess,
    authScopes: { human: true },
    errors: { types: [...COMMON_ERRORS, ManifestInvalidError] },
    args: { input: t.arg({ type: SyncProjectManifestInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.manifests.sync(ctx.principal!, {
        projectId: String(input.projectId),
        ref: input.ref ?? null,
      }),
  }),
);
