// The singulacomp CLI against a real server: --json for scripts, the config file written by login,
// the environment winning over it, and the confirmation prompt in a real terminal (tmux).
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo, git } from '../support/git';
import { runCli, startPane } from './helpers';

describe('the singulacomp CLI', () => {
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  let cliEnv: Record<string, string>;
  const cli = (args: string[], env: Record<string, string> = cliEnv) => runCli(t.dataDir, args, env);
  const parse = <T>(result: { code: number; stdout: string; stderr: string }): T => {
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as T;
  };

  async function sessionStatus(sessionId: string): Promise<string> {
    return (await t.app.services.db.session.findUniqueOrThrow({ where: { id: sessionId } })).status;
  }

  beforeAll(async () => {
    t = await startTestApp();
    repo = createTestRepo({ 'README.md': '# cli\n' });
    const res = await t.request(CreateProjectDocument, {
      input: { name: 'cli-project', repositoryUrl: repo.url },
    });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.projectId;
    const home = mkdtempSync(join(tmpdir(), 'sc-cli-home-'));
    cliEnv = { HOME: home, SINGULACOMP_CONFIG_DIR: join(home, 'config') };
  });
  afterAll(async () => t?.stop());

  test('login stores the token in a 0600 config file; SINGULACOMP_TOKEN and SINGULACOMP_API_URL win over it', async () => {
    const login = parse<{ kind: string; configPath: string }>(
      await cli(['--json', 'login', '--api-url', t.url, '--token', t.adminToken]),
    );
    expect(login.kind).toBe('PERSONAL_ACCESS');
    expect(login.configPath).toBe(join(cliEnv.SINGULACOMP_CONFIG_DIR!, 'config.json'));
    expect(statSync(login.configPath).mode & 0o777).toBe(0o600);

    const projects = parse<Array<{ projectId: string; name: string }>>(
      await cli(['--json', 'projects', 'list']),
    );
    expect(projects.map((p) => p.projectId)).toEqual([projectId]);

    const other = await t.seedAccount();
    const asOther = parse<unknown[]>(
      await cli(['--json', 'projects', 'list'], { ...cliEnv, SINGULACOMP_TOKEN: other.token }),
    );
    expect(asOther).toEqual([]);
    const wrongUrl = await cli(['projects', 'list'], {
      ...cliEnv,
      SINGULACOMP_API_URL: 'http://127.0.0.1:9',
    });
    expect(wrongUrl.code).toBe(1);
    expect(wrongUrl.stderr).toContain('cannot reach http://127.0.0.1:9');
  });

  test('sessions and change requests from scripts: create, list, open, merge with --json', async () => {
    const session = parse<{ sessionId: string; branchName: string; status: string }>(
      await cli(['--json', 'sessions', 'create', '--project', projectId, '--prompt', 'hello']),
    );
    expect(session.branchName).toBe(session.sessionId);
    expect(repo.branches()[session.sessionId]).toBe(repo.head());
    const listed = parse<Array<{ sessionId: string }>>(
      await cli(['--json', 'sessions', 'list', '--project', projectId]),
    );
    expect(listed.map((s) => s.sessionId)).toContain(session.sessionId);

    const work = mkdtempSync(join(tmpdir(), 'sc-cli-work-'));
    git(work, 'clone', '-q', '--branch', session.sessionId, repo.url, '.');
    git(
      work,
      '-c',
      'user.name=T',
      '-c',
      'user.email=t@example.com',
      'commit',
      '-q',
      '--allow-empty',
      '-m',
      'work',
    );
    git(work, 'push', '-q', 'origin', 'HEAD');
    const head = git(work, 'rev-parse', 'HEAD');

    const opened = parse<{ changeRequestId: string; status: string; headCommit: string }>(
      await cli([
        '--json',
        'change-requests',
        'open',
        '--session',
        session.sessionId,
        '--title',
        'From the CLI',
      ]),
    );
    expect(opened).toMatchObject({ status: 'OPEN', headCommit: head });
    const merged = parse<{ status: string; mergeCommit: string }>(
      await cli([
        '--json',
        'change-requests',
        'merge',
        opened.changeRequestId,
        '--method',
        'FAST_FORWARD',
        '--yes',
      ]),
    );
    expect(merged).toMatchObject({ status: 'MERGED', mergeCommit: head });
    expect(repo.head()).toBe(head);

    const failed = await cli(['sessions', 'create', '--project', projectId, '--base-ref', 'no-such-branch']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('BASE_REF_NOT_FOUND');
  });

  test('tokens: create shows the secret once, revoke ends it', async () => {
    const created = parse<{ secret: string; token: { id: string; scopes: string[] } }>(
      await cli(['--json', 'tokens', 'create', '--name', 'ci', '--scopes', 'projects:read']),
    );
    expect(created.secret).toMatch(/^singulacomp_pat_/);
    expect(created.token.scopes).toEqual(['projects:read']);
    const asToken = { ...cliEnv, SINGULACOMP_TOKEN: created.secret };
    expect(parse<unknown[]>(await cli(['--json', 'projects', 'list'], asToken))).toHaveLength(1);

    const revoked = parse<{ revokedAt: string | null }>(
      await cli(['--json', 'tokens', 'revoke', created.token.id, '--yes']),
    );
    expect(revoked.revokedAt).not.toBeNull();
    const after = await cli(['projects', 'list'], asToken);
    expect(after.code).toBe(1);
    expect(after.stderr).toContain('UNAUTHENTICATED');
  });

  test('destructive commands ask first: off a terminal they need --yes, on a terminal they wait for y', async () => {
    const session = parse<{ sessionId: string }>(
      await cli(['--json', 'sessions', 'create', '--project', projectId]),
    );
    const refused = await cli(['sessions', 'stop', session.sessionId]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Pass --yes to confirm');
    expect(await sessionStatus(session.sessionId)).not.toBe('STOPPED');

    const declined = startPane(
      [join(t.dataDir, 'bin', 'singulacomp'), 'sessions', 'stop', session.sessionId],
      cliEnv,
    );
    try {
      await declined.waitForText(/Stop session .* \[y\/N\]/);
      declined.send('n', 'Enter');
      expect(await declined.exitCode()).toBe(1);
      expect(declined.text()).toContain('Aborted.');
    } finally {
      declined.kill();
    }
    expect(await sessionStatus(session.sessionId)).not.toBe('STOPPED');

    const accepted = startPane(
      [join(t.dataDir, 'bin', 'singulacomp'), 'sessions', 'stop', session.sessionId],
      cliEnv,
    );
    try {
      await accepted.waitForText(/\[y\/N\]/);
      accepted.send('y', 'Enter');
      expect(await accepted.exitCode()).toBe(0);
      expect(accepted.text()).toContain(`Session ${session.sessionId} STOPPED`);
    } finally {
      accepted.kill();
    }
    expect(await sessionStatus(session.sessionId)).toBe('STOPPED');
  });
});
