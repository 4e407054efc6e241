// Project onboarding through the API (R-PRJ-2): createProject reads the manifest at once, a manifest
// made stale by a moved default branch is re-read at session create, and projects can be edited and
// deleted.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  CreateProjectWithTemplatesDocument,
  CreateSessionDocument,
  DeleteProjectDocument,
  ProjectTemplatesDocument,
  StopSessionDocument,
  UpdateProjectDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo, git } from '../support/git';

const MANIFEST = `sandbox:
  default: web
  templates:
    - slug: web
      name: Web
      image: node:22
      memory: 8
    - slug: base
      name: Base
      image: ubuntu:24.04
`;

describe('project onboarding', () => {
  let t: TestApp;
  let sql: pg.Client;

  beforeAll(async () => {
    t = await startTestApp();
    sql = new pg.Client({ connectionString: t.database!.url });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await t?.stop();
  });

  async function create(input: { name: string; repositoryUrl: string; defaultBranch?: string }) {
    const res = await t.request(CreateProjectWithTemplatesDocument, { input });
    return res.data?.createProject;
  }

  test('createProject answers with the templates its manifest declares', async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': MANIFEST });
    const payload = await create({ name: 'at-once', repositoryUrl: repo.url });
    if (payload?.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(payload));
    expect(payload.project.manifestCommit).toBe(repo.head());
    expect(payload.project.templates).toEqual([
      { slug: 'base', isDefault: false, memoryGiB: 4 },
      { slug: 'web', isDefault: true, memoryGiB: 8 },
    ]);
    const { rows } = await sql.query(
      'SELECT t.slug FROM "Template" t JOIN "Project" p ON p.id = t."projectId" WHERE p.name = $1 ORDER BY slug',
      ['at-once'],
    );
    expect(rows).toEqual([{ slug: 'base' }, { slug: 'web' }]);
  });

  test('an invalid manifest refuses the create with every problem as a field error, creating nothing', async () => {
    const repo = createTestRepo({
      'singulacomp.yaml':
        'sandbox:\n  default: nowhere\n  templates:\n    - slug: Bad Slug\n      name: x\n      image: a\n',
    });
    const payload = await create({ name: 'broken', repositoryUrl: repo.url });
    if (payload?.__typename !== 'ManifestInvalidError') throw new Error(JSON.stringify(payload));
    expect(payload.code).toBe('MANIFEST_INVALID');
    const fields = payload.problems.map((p) => p.field.join('.'));
    expect(fields).toEqual(expect.arrayContaining(['sandbox.templates.0.slug', 'sandbox.default']));
    expect(payload.field).toEqual(payload.problems[0]?.field);
    expect((await sql.query('SELECT 1 FROM "Project" WHERE name = $1', ['broken'])).rowCount).toBe(0);
  });

  test('an unreadable repository or a missing branch is refused on the field at fault', async () => {
    const missing = await create({ name: 'nowhere', repositoryUrl: '/nonexistent/repository.git' });
    expect(missing).toMatchObject({
      __typename: 'RepositoryUnreachableError',
      code: 'REPOSITORY_UNREACHABLE',
      field: ['input', 'repositoryUrl'],
    });
    const repo = createTestRepo();
    const branch = await create({ name: 'branchless', repositoryUrl: repo.url, defaultBranch: 'develop' });
    expect(branch).toMatchObject({ __typename: 'ValidationError', field: ['input', 'defaultBranch'] });
    expect(
      (await sql.query('SELECT 1 FROM "Project" WHERE name = ANY($1)', [['nowhere', 'branchless']])).rowCount,
    ).toBe(0);
  });

  test('without defaultBranch a repository whose HEAD is master gets master', async () => {
    const repo = createTestRepo(null, { upstream: false });
    git(repo.workdir, 'checkout', '-q', '-b', 'master');
    repo.commit({ 'singulacomp.yaml': MANIFEST });
    const payload = await create({ name: 'legacy-master', repositoryUrl: repo.url });
    if (payload?.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(payload));
    expect(payload.project.defaultBranch).toBe('master');
    expect(payload.project.templates.map((tpl) => tpl.slug)).toEqual(['base', 'web']);
  });

  test('a session create re-reads the manifest once the default branch moved', async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': MANIFEST });
    const created = await create({ name: 'moving', repositoryUrl: repo.url });
    if (created?.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(created));
    const projectId = created.project.id;
    const moved = repo.commit({
      'singulacomp.yaml': `${MANIFEST}    - slug: gpu\n      name: GPU\n      image: cuda:12\n`,
    });
    // The new template is asked for by slug: the create finds it by re-reading the manifest.
    const res = await t.request(CreateSessionDocument, { input: { projectId, templateSlug: 'gpu' } });
    const session = res.data?.createSession;
    if (session?.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    const project = await t.request(ProjectTemplatesDocument, { id: projectId });
    expect(project.data?.project?.manifestCommit).toBe(moved);
    expect(project.data?.project?.templates.map((tpl) => tpl.slug)).toEqual(['base', 'gpu', 'web']);
    const { rows } = await sql.query(
      'SELECT t.slug FROM "Session" s JOIN "Template" t ON t.id = s."templateId" WHERE s.id = $1',
      [session.session.sessionId],
    );
    expect(rows).toEqual([{ slug: 'gpu' }]);
    await t.request(StopSessionDocument, { input: { sessionId: session.session.id } });
  });

  test('updateProject renames, changes the branch (re-reading its manifest) and clears the credential', async () => {
    const repo = createTestRepo({ 'README.md': '# none\n' });
    const created = await create({ name: 'editable', repositoryUrl: repo.url });
    if (created?.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(created));
    expect(created.project.templates).toEqual([]);
    repo.git('checkout', '-q', '-b', 'release');
    repo.commit({ 'singulacomp.yaml': MANIFEST });

    const res = await t.request(UpdateProjectDocument, {
      input: {
        projectId: created.project.id,
        name: 'edited',
        defaultBranch: 'release',
        gitCredential: 'ghp_example',
        provider: 'LOCAL',
      },
    });
    const payload = res.data?.updateProject;
    if (payload?.__typename !== 'UpdateProjectSuccess') throw new Error(JSON.stringify(res));
    expect(payload.project).toMatchObject({
      name: 'edited',
      defaultBranch: 'release',
      hasGitCredential: true,
      manifestCommit: repo.git('rev-parse', 'HEAD'),
    });
    expect(payload.project.templates.map((tpl) => tpl.slug)).toEqual(['base', 'web']);

    const cleared = await t.request(UpdateProjectDocument, {
      input: { projectId: created.project.id, clearGitCredential: true },
    });
    expect(cleared.data?.updateProject).toMatchObject({
      project: { hasGitCredential: false, name: 'edited' },
    });
    const { rows } = await sql.query('SELECT name, "gitCredentialEnc" FROM "Project" WHERE id = $1', [
      await projectUuid('edited'),
    ]);
    expect(rows).toEqual([{ name: 'edited', gitCredentialEnc: null }]);

    const taken = await t.request(UpdateProjectDocument, {
      input: { projectId: created.project.id, name: 'at-once' },
    });
    expect(taken.data?.updateProject).toMatchObject({
      __typename: 'ConflictError',
      field: ['input', 'name'],
    });
    const badBranch = await t.request(UpdateProjectDocument, {
      input: { projectId: created.project.id, defaultBranch: 'nope' },
    });
    expect(badBranch.data?.updateProject).toMatchObject({
      __typename: 'ValidationError',
      field: ['input', 'defaultBranch'],
    });
    expect(
      (await sql.query('SELECT "defaultBranch" FROM "Project" WHERE name = $1', ['edited'])).rows,
    ).toEqual([{ defaultBranch: 'release' }]);
  });

  async function projectUuid(name: string): Promise<string> {
    const { rows } = await sql.query<{ id: string }>('SELECT id FROM "Project" WHERE name = $1', [name]);
    return rows[0]!.id;
  }

  test('deleteProject is refused while a session is live and removes the project once it stopped', async () => {
    const repo = createTestRepo();
    const created = await create({ name: 'doomed', repositoryUrl: repo.url });
    if (created?.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(created));
    const projectId = created.project.id;
    const res = await t.request(CreateSessionDocument, { input: { projectId } });
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    const sessionId = res.data.createSession.session.id;

    const refused = await t.request(DeleteProjectDocument, { input: { projectId } });
    expect(refused.data?.deleteProject).toMatchObject({
      __typename: 'ConflictError',
      field: ['input', 'projectId'],
    });
    const uuid = await projectUuid('doomed');

    await t.request(StopSessionDocument, { input: { sessionId } });
    const other = await t.seedAccount();
    const foreign = await t.request(DeleteProjectDocument, { input: { projectId } }, other.token);
    expect(foreign.data?.deleteProject).toMatchObject({ __typename: 'NotFoundError' });

    const deleted = await t.request(DeleteProjectDocument, { input: { projectId } });
    expect(deleted.data?.deleteProject).toEqual({ __typename: 'DeleteProjectSuccess', projectId });
    expect((await sql.query('SELECT 1 FROM "Project" WHERE id = $1', [uuid])).rowCount).toBe(0);
    expect((await sql.query('SELECT 1 FROM "Session" WHERE "projectId" = $1', [uuid])).rowCount).toBe(0);
    const again = await t.request(DeleteProjectDocument, { input: { projectId } });
    expect(again.data?.deleteProject).toMatchObject({ __typename: 'NotFoundError' });
  });
});
