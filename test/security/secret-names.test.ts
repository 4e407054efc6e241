// Attack 2: a token with `secrets:write` tries to run code on the host through a runtime secret
// whose name changes how processes load (NODE_OPTIONS, LD_PRELOAD, PATH, …).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encrypt } from '../../resolvers/auth/crypto';
import { parseId } from '../../resolvers/ids';
import { RESERVED_SECRET_NAMES, reservedSecretName } from '../../resolvers/projects/secret-names';
import { CreateProjectDocument, CreateSessionDocument, SetSecretDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

describe('runtime secret names', () => {
  let t: TestApp;
  let projectId: string;
  /** The project's row id (projectId is its global id). */
  let projectRowId: string;
  let writerToken: string;
  const repo = createTestRepo({ 'README.md': '# secrets\n' });

  beforeAll(async () => {
    // The entry records the environment it was given, then idles like a daemon.
    t = await startTestApp({
      env: { SINGULACOMP_LOCAL_ENTRY: 'env > {home}/entry-env.txt; exec sleep 600' },
    });
    const project = await t.request(CreateProjectDocument, {
      input: { name: 'sec', repositoryUrl: repo.url },
    });
    if (project.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(project));
    projectId = project.data.createProject.project.id;
    projectRowId = parseId(projectId, 'Project', ['projectId']);
    const admin = await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`);
    if (admin?.kind !== 'USER') throw new Error('admin token did not authenticate');
    writerToken = (
      await t.app.services.tokens.createPersonalAccessToken(admin, {
        name: 'secrets only',
        scopes: ['projects:read', 'secrets:write'],
      })
    ).secret;
  });
  afterAll(async () => t?.stop());

  const attacks = [
    'NODE_OPTIONS',
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'DYLD_INSERT_LIBRARIES',
    'PATH',
    'HOME',
    'SHELL',
    'BASH_ENV',
    'ENV',
    'PYTHONSTARTUP',
    'GIT_SSH_COMMAND',
    'OPENCODE_CONFIG',
    'npm_config_script_shell',
    'node_options',
    'SINGULACOMP_TOKEN',
  ];
  for (const name of attacks) {
    test(`setSecret refuses ${name} with a typed error on the name field and stores nothing`, async () => {
      const res = await t.request(
        SetSecretDocument,
        { input: { projectId, name, value: '--require /tmp/evil.js', runtimeDelivery: true } },
        writerToken,
      );
      expect(res.data?.setSecret).toMatchObject({
        __typename: 'ReservedSecretNameError',
        code: 'RESERVED_SECRET_NAME',
        field: ['input', 'name'],
      });
      const stored = await t.app.services.db.projectSecret.findMany({
        where: { projectId: projectRowId, name },
      });
      expect(stored).toEqual([]);
    });
  }

  test('the written-down list covers every documented family and lets ordinary names through', () => {
    expect(RESERVED_SECRET_NAMES.prefixes).toEqual(
      expect.arrayContaining(['LD_', 'DYLD_', 'PYTHON', 'GIT_', 'OPENCODE_', 'SINGULACOMP_']),
    );
    expect(RESERVED_SECRET_NAMES.exact).toEqual(
      expect.arrayContaining(['NODE_OPTIONS', 'PATH', 'HOME', 'SHELL']),
    );
    for (const ok of [
      'OPENAI_API_KEY',
      'DATABASE_PASSWORD',
      'GITHUB_TOKEN',
      'PATHNAME_PREFIX',
      'HOMEPAGE_URL',
    ])
      expect(reservedSecretName(ok), ok).toBeNull();
  });

  test('a reserved name stored before the rule is not delivered, and platform variables win over delivered ones', async () => {
    const key = t.app.services.keys.encryption;
    // Rows as an older server would have stored them.
    await t.app.services.db.projectSecret.createMany({
      data: [
        {
          projectId: projectRowId,
          name: 'NODE_OPTIONS',
          valueEnc: encrypt(key, '--require /tmp/evil.js'),
          runtimeDelivery: true,
        },
        {
          projectId: projectRowId,
          name: 'LD_PRELOAD',
          valueEnc: encrypt(key, '/tmp/evil.so'),
          runtimeDelivery: true,
        },
        {
          projectId: projectRowId,
          name: 'HARMLESS_VALUE',
          valueEnc: encrypt(key, 'delivered'),
          runtimeDelivery: true,
        },
      ],
    });
    const created = await t.request(CreateSessionDocument, { input: { projectId, prompt: 'p' } });
    if (created.data?.createSession.__typename !== 'CreateSessionSuccess')
      throw new Error(JSON.stringify(created));
    const sessionId = created.data.createSession.session.sessionId;
    const sandbox = await waitFor(async () => {
      const row = await t.app.services.db.sandbox.findFirst({ where: { sessionId } });
      return row?.providerSandboxId ? row : null;
    });
    const dir = join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!);
    const envFile = join(dir, 'home', 'entry-env.txt');
    const text = await waitFor(async () => (existsSync(envFile) ? readFileSync(envFile, 'utf8') : null));
    const env = Object.fromEntries(
      text
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(env.HARMLESS_VALUE).toBe('delivered');
    expect(env.NODE_OPTIONS).toBeUndefined();
    expect(env.LD_PRELOAD).toBeUndefined();
    expect(env.HOME).toBe(join(dir, 'home'));
    expect(env.SINGULACOMP_SESSION_ID).toBe(sessionId);
    const config = readFileSync(join(dir, 'sandbox.json'), 'utf8');
    expect(config).not.toContain('evil');
  });
});
