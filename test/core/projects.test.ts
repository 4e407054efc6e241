// Projects end to end: manifests from real repositories become templates, a template's spec reaches
// the sandbox, secrets are encrypted at rest and only runtime-delivery ones reach the sandbox env,
// and account limits are for admins only.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  ProjectDocument,
  SessionDocument,
  SetSecretDocument,
  StopSessionDocument,
  SyncProjectManifestDocument,
  UpdateAccountDocument,
  ViewerDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

const YAML_MANIFEST = `sandbox:
  default: web
  templates:
    - slug: web
      name: Web app
      dockerfile: docker/Dockerfile
      cpu: 4
      memory: 8
      disk: 30
    - slug: base
      name: Plain Ubuntu
      image: ubuntu:24.04
    - slug: huge
      name: Too big
      image: ubuntu:24.04
      cpu: 64
`;

const TOML_MANIFEST = `[sandbox]
default = "py"

[[sandbox.templates]]
slug = "py"
name = "Python"
image = "python:3.12"
memory = 2
`;

const BAD_MANIFEST = `sandbox:
  default: nowhere
  templates:
    - slug: Bad Slug
      name: x
      image: ubuntu:24.04
    - slug: both
      name: Both sources
      image: ubuntu:24.04
      dockerfile: Dockerfile
    - slug: escape
      name: Escapes
      dockerfile: ../outside/Dockerfile
    - slug: blankname
      name: '  '
      image: ubuntu:24.04
`;

describe('projects, manifests, secrets and accounts', () => {
  let t: TestApp;
  let sql: pg.Client;

  async function project(name: string, repo: TestRepo): Promise<string> {
    const res = await t.request(CreateProjectDocument, { input: { name, repositoryUrl: repo.url } });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    return res.data.createProject.project.id;
  }

  beforeAll(async () => {
    t = await startTestApp();
    sql = new pg.Client({ connectionString: t.database!.url });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await t?.stop();
  });

  test('syncProjectManifest writes the templates singulacomp.yaml declares, clamping with a warning', async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': YAML_MANIFEST, 'docker/Dockerfile': 'FROM node:22\n' });
    const projectId = await project('yaml', repo);
    const res = await t.request(SyncProjectManifestDocument, { input: { projectId } });
    const payload = res.data?.syncProjectManifest;
    if (payload?.__typename !== 'SyncProjectManifestSuccess') throw new Error(JSON.stringify(res));
    expect(payload.commit).toBe(repo.head());
    const bySlug = Object.fromEntries(payload.project.templates.map((tpl) => [tpl.slug, tpl]));
    expect(bySlug.web).toMatchObject({
      name: 'Web app',
      dockerfile: 'docker/Dockerfile',
      image: null,
      cpu: 4,
      memoryGiB: 8,
      diskGiB: 30,
      isDefault: true,
    });
    expect(bySlug.base).toMatchObject({
      image: 'ubuntu:24.04',
      dockerfile: null,
      cpu: 2,
      memoryGiB: 4,
      diskGiB: 20,
      isDefault: false,
    });
    expect(bySlug.huge?.cpu).toBe(32);
    expect(bySlug.huge?.warnings.join(' ')).toMatch(/cpu/);
    const { rows } = await sql.query<{ slug: string; isDefault: boolean }>(
      'SELECT slug, "isDefault" FROM "Template" t JOIN "Project" p ON p.id = t."projectId" WHERE p.name = $1 ORDER BY slug',
      ['yaml'],
    );
    expect(rows).toEqual([
      { slug: 'base', isDefault: false },
      { slug: 'huge', isDefault: false },
      { slug: 'web', isDefault: true },
    ]);
  });

  test('the legacy singulacomp.toml is read the same way', async () => {
    const repo = createTestRepo({ 'singulacomp.toml': TOML_MANIFEST });
    const projectId = await project('toml', repo);
    const res = await t.request(SyncProjectManifestDocument, { input: { projectId } });
    expect(res.data?.syncProjectManifest).toMatchObject({
      __typename: 'SyncProjectManifestSuccess',
      project: {
        templates: [{ slug: 'py', name: 'Python', image: 'python:3.12', memoryGiB: 2, isDefault: true }],
      },
    });
  });

  test('a bad manifest is a ManifestInvalidError listing every field at fault, and changes no template', async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': YAML_MANIFEST, 'docker/Dockerfile': 'FROM node:22\n' });
    const projectId = await project('bad', repo);
    await t.request(SyncProjectManifestDocument, { input: { projectId } });
    const before = await sql.query('SELECT slug, cpu FROM "Template" ORDER BY id');
    repo.commit({ 'singulacomp.yaml': BAD_MANIFEST });
    const res = await t.request(SyncProjectManifestDocument, { input: { projectId } });
    const payload = res.data?.syncProjectManifest;
    if (payload?.__typename !== 'ManifestInvalidError') throw new Error(JSON.stringify(res));
    expect(payload.code).toBe('MANIFEST_INVALID');
    const fields = payload.problems.map((p) => p.field.join('.'));
    expect(fields).toEqual(
      expect.arrayContaining([
        'sandbox.templates.0.slug',
        'sandbox.templates.2.dockerfile',
        'sandbox.templates.3.name',
        'sandbox.default',
      ]),
    );
    expect(fields.some((f) => f.startsWith('sandbox.templates.1'))).toBe(true);
    for (const problem of payload.problems) expect(problem.message.length).toBeGreaterThan(5);
    expect(payload.field).toEqual(payload.problems[0]?.field);
    expect((await sql.query('SELECT slug, cpu FROM "Template" ORDER BY id')).rows).toEqual(before.rows);
  });

  test("createSession with a template slug gives the sandbox that template's spec", async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': YAML_MANIFEST, 'docker/Dockerfile': 'FROM node:22\n' });
    const projectId = await project('spec', repo);
    await t.request(SyncProjectManifestDocument, { input: { projectId } });
    const sessionOf = async (templateSlug?: string) => {
      const res = await t.request(CreateSessionDocument, { input: { projectId, templateSlug } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const id = res.data.createSession.session.sessionId;
      return waitFor(async () => {
        const s = (await t.request(SessionDocument, { id })).data?.session;
        return s?.sandbox ? s : null;
      });
    };
    const base = await sessionOf('base');
    expect(base.template?.slug).toBe('base');
    expect(base.sandbox).toMatchObject({ cpu: 2, memoryGiB: 4, diskGiB: 20 });
    const byDefault = await sessionOf();
    expect(byDefault.template?.slug).toBe('web');
    expect(byDefault.sandbox).toMatchObject({ cpu: 4, memoryGiB: 8, diskGiB: 30 });
    const stored = await sql.query(
      'SELECT cpu, "memoryGiB", "diskGiB" FROM "Sandbox" WHERE "sessionId" = $1',
      [byDefault.sessionId],
    );
    expect(stored.rows).toEqual([{ cpu: 4, memoryGiB: 8, diskGiB: 30 }]);
    for (const s of [base, byDefault]) await t.request(StopSessionDocument, { input: { sessionId: s.id } });
  });

  test('secret values are encrypted at rest and only runtime-delivery secrets reach the sandbox env', async () => {
    const repo = createTestRepo();
    const projectId = await project('secrets', repo);
    const delivered = 'sk-live-delivered-0123456789';
    const kept = 'db-password-kept-9876543210';
    const set = (name: string, value: string, runtimeDelivery: boolean) =>
      t.request(SetSecretDocument, { input: { projectId, name, value, runtimeDelivery } });
    expect((await set('API_KEY', delivered, true)).data?.setSecret).toMatchObject({
      secret: { name: 'API_KEY', runtimeDelivery: true },
    });
    expect((await set('DB_PASSWORD', kept, false)).data?.setSecret).toMatchObject({
      secret: { name: 'DB_PASSWORD', runtimeDelivery: false },
    });
    const reserved = await set('singulacomp_token', 'x', true);
    expect(reserved.data?.setSecret).toMatchObject({
      __typename: 'ReservedSecretNameError',
      field: ['input', 'name'],
    });
    const { rows } = await sql.query<{ name: string; valueEnc: string }>(
      'SELECT * FROM "ProjectSecret" ORDER BY name',
    );
    expect(rows.map((r) => r.name)).toEqual(['API_KEY', 'DB_PASSWORD']);
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(delivered);
    expect(dump).not.toContain(kept);
    expect(dump).not.toContain(Buffer.from(delivered).toString('base64').slice(0, 16));
    const listed = await t.request(ProjectDocument, { id: projectId });
    expect(JSON.stringify(listed.data)).not.toContain(delivered);

    const created = await t.request(CreateSessionDocument, { input: { projectId } });
    if (created.data?.createSession.__typename !== 'CreateSessionSuccess')
      throw new Error(JSON.stringify(created));
    const sessionId = created.data.createSession.session.sessionId;
    const sandbox = await waitFor(async () => {
      const s = await t.app.services.db.sandbox.findUnique({ where: { sessionId } });
      return s?.providerSandboxId ? s : null;
    });
    const config = JSON.parse(
      readFileSync(join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!, 'sandbox.json'), 'utf8'),
    ) as { env: Record<string, string> };
    expect(config.env.API_KEY).toBe(delivered);
    expect(config.env).not.toHaveProperty('DB_PASSWORD');
    expect(JSON.stringify(config)).not.toContain(kept);
    expect(config.env.SINGULACOMP_SESSION_ID).toBe(sessionId);
    expect(config.env.SINGULACOMP_BRANCH_NAME).toBe(sessionId);
    await t.request(StopSessionDocument, { input: { sessionId } });
  });

  test('updateAccount changes tier and limit for account admins only', async () => {
    const admin = await t.seedAccount({ tier: 'FREE' });
    const member = await t.seedAccount({ tier: 'FREE', admin: false });
    const scoped = await t.seedAccount({ tier: 'FREE', scopes: ['sessions:read', 'sessions:write'] });

    const viewer = async (token: string) => (await t.request(ViewerDocument, {}, token)).data?.viewer.account;
    expect(await viewer(admin.token)).toMatchObject({ tier: 'FREE', concurrentSessionLimit: 2 });

    const tier = await t.request(UpdateAccountDocument, { input: { tier: 'PRO' } }, admin.token);
    expect(tier.data?.updateAccount).toMatchObject({ account: { tier: 'PRO', concurrentSessionLimit: 10 } });
    const limit = await t.request(
      UpdateAccountDocument,
      { input: { concurrentSessionLimit: 3 } },
      admin.token,
    );
    expect(limit.data?.updateAccount).toMatchObject({ account: { tier: 'PRO', concurrentSessionLimit: 3 } });
    const stored = await sql.query(
      'SELECT tier::text, "concurrentSessionLimit" FROM "Account" WHERE id = $1',
      [admin.accountId],
    );
    expect(stored.rows).toEqual([{ tier: 'PRO', concurrentSessionLimit: 3 }]);
    const cleared = await t.request(UpdateAccountDocument, { input: { clearLimit: true } }, admin.token);
    expect(cleared.data?.updateAccount).toMatchObject({ account: { concurrentSessionLimit: 10 } });

    for (const token of [member.token, scoped.token]) {
      const res = await t.request(UpdateAccountDocument, { input: { tier: 'ENTERPRISE' } }, token);
      expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    }
    const untouched = await sql.query(
      'SELECT tier::text FROM "Account" WHERE id = ANY($1::uuid[]) ORDER BY tier',
      [[member.accountId, scoped.accountId]],
    );
    expect(untouched.rows).toEqual([{ tier: 'FREE' }, { tier: 'FREE' }]);
  });
});
