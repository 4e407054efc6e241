// The CLI as a newcomer meets it: --version, one line when not logged in, login defaulting to the
// local server, projects created and synced from the CLI (templates read at once, manifest problems
// listed), and ids as positional arguments (the old flags still accepted).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { runCli } from './helpers';

const MANIFEST = `sandbox:
  default: web
  templates:
    - slug: web
      name: Web
      image: node:22
`;

describe('the CLI for a newcomer', () => {
  let t: TestApp;
  let env: Record<string, string>;
  let home: string;
  const cli = (args: string[], extra: Record<string, string> = {}) =>
    runCli(t.dataDir, args, { ...env, ...extra });
  const parse = <T>(result: { code: number; stdout: string; stderr: string }): T => {
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as T;
  };

  beforeAll(async () => {
    t = await startTestApp();
    home = mkdtempSync(join(tmpdir(), 'sc-cli-new-'));
    env = { HOME: home, SINGULACOMP_CONFIG_DIR: join(home, 'config') };
  });
  afterAll(async () => t?.stop());

  test('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const result = await cli(['--version']);
    expect(result).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  test('not logged in: one line saying what to do, no stack trace', async () => {
    const result = await cli(['projects', 'list']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'singulacomp: Not logged in: run `singulacomp login` (the local server by default), or set SINGULACOMP_API_URL and SINGULACOMP_TOKEN.',
    ]);
  });

  test('login without --api-url goes to the local server', async () => {
    const result = await cli(['login', '--token', 'singulacomp_pat_not-a-real-token']);
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('Cannot log in to http://127.0.0.1:4000: ');
    // With the URL it stores the config, as before.
    const login = parse<{ configPath: string }>(
      await cli(['--json', 'login', '--api-url', t.url, '--token', t.adminToken]),
    );
    expect(JSON.parse(readFileSync(login.configPath, 'utf8'))).toEqual({
      apiUrl: t.url,
      token: t.adminToken,
    });
  });

  test('projects create reads the manifest at once; sync reads it again; a bad manifest lists its problems', async () => {
    const repo = createTestRepo({ 'singulacomp.yaml': MANIFEST });
    const created = parse<{ projectId: string; templates: Array<{ slug: string; isDefault: boolean }> }>(
      await cli(['--json', 'projects', 'create', 'from-cli', repo.url]),
    );
    expect(created.templates).toEqual([expect.objectContaining({ slug: 'web', isDefault: true })]);
    const human = await cli(['projects', 'create', 'from-cli-2', repo.url]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('web (default): Web');

    repo.commit({
      'singulacomp.yaml': `${MANIFEST}    - slug: base\n      name: Base\n      image: ubuntu:24.04\n`,
    });
    const synced = parse<{ templates: Array<{ slug: string }> }>(
      await cli(['--json', 'projects', 'sync', created.projectId]),
    );
    expect(synced.templates.map((tpl) => tpl.slug)).toEqual(['base', 'web']);
    expect(
      (
        await t.app.services.db.template.findMany({
          where: { projectId: created.projectId },
          orderBy: { slug: 'asc' },
        })
      ).map((tpl) => tpl.slug),
    ).toEqual(['base', 'web']);

    const bad = createTestRepo({
      'singulacomp.yaml': 'sandbox:\n  templates:\n    - slug: Bad Slug\n      name: x\n      image: a\n',
    });
    const refused = await cli(['projects', 'create', 'broken', bad.url]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('The manifest is invalid:');
    expect(refused.stderr).toContain('  sandbox.templates.0.slug: ');
    expect(refused.stderr).not.toMatch(/\n\s+at /);
  });

  test('ids are positional: sessions create <project>, reload <id> without --project; the flags still work', async () => {
    const repo = createTestRepo();
    const project = parse<{ projectId: string }>(
      await cli(['--json', 'projects', 'create', 'positional', repo.url]),
    );
    const positional = parse<{ sessionId: string; status: string }>(
      await cli(['--json', 'sessions', 'create', project.projectId]),
    );
    const flagged = parse<{ sessionId: string }>(
      await cli(['--json', 'sessions', 'create', '--project', project.projectId]),
    );
    const sessions = await t.app.services.db.session.findMany({ where: { projectId: project.projectId } });
    expect(sessions.map((s) => s.id).sort()).toEqual([positional.sessionId, flagged.sessionId].sort());

    // reload needs no --project: it gets as far as the API (this session has no agent to reload).
    const reload = await cli(['sessions', 'reload', positional.sessionId, '--no-repo', '--yes']);
    expect(reload.stderr).not.toContain("required option '--project");
    const wrongProject = await cli([
      'sessions',
      'reload',
      positional.sessionId,
      '--project',
      'other',
      '--yes',
    ]);
    expect(wrongProject).toMatchObject({ code: 1 });
    expect(wrongProject.stderr).toContain(`belongs to project ${project.projectId}`);
    for (const id of [positional.sessionId, flagged.sessionId]) {
      expect((await cli(['sessions', 'stop', id, '--yes'])).code).toBe(0);
    }

    // --wait ends with the session: exit 1 and the reason, in one line.
    const waiting = cli(['sessions', 'create', project.projectId, '--wait']);
    const session = await waitFor(
      () =>
        t.app.services.db.session.findFirst({
          where: { projectId: project.projectId, status: { in: ['PROVISIONING', 'RUNNING'] } },
        }),
      60_000,
    );
    expect((await cli(['sessions', 'stop', session.id, '--yes'])).code).toBe(0);
    const ended = await waiting;
    expect(ended.code).toBe(1);
    expect(ended.stderr).toContain(`Session ${session.id} created; waiting for its agent…`);
    expect(ended.stderr).toContain(`singulacomp: Session ${session.id} is STOPPED.`);
  });
});
