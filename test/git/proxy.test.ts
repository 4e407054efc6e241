// The git proxy from inside real LOCAL sandboxes: git runs in the sandbox's workspace with the entry
// process's own environment (read from /proc), so origin, the credential helper and the token are
// exactly what the sandbox has. The upstream is a real bare repository.
import { execFile } from 'node:child_process';
import { chmodSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument } from '../generated/graphql';
import { type LiveSession, startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { SAFE_DIRECTORY_ENV, type TestRepo, createTestRepo, git } from '../support/git';
import { waitFor } from '../support/wait';

const run = promisify(execFile);
const UPSTREAM_SECRET = 'upstream-token-5f3a9c1e7d';

interface Sandbox {
  session: LiveSession;
  workspace: string;
  dir: string;
  env: Record<string, string>;
}

describe('the git proxy seen from a LOCAL sandbox', () => {
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  let a: Sandbox;
  let b: Sandbox;

  async function sandboxOf(session: LiveSession): Promise<Sandbox> {
    const row = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: session.sandboxId } });
    const dir = join(t.dataDir, 'sandboxes', row.providerSandboxId!);
    // The entry process's environment, once entry.pid names a live process (it is written as the
    // entry starts; a read between the two sees no process yet).
    const environ = await waitFor(
      () => readFileSync(`/proc/${readFileSync(join(dir, 'entry.pid'), 'utf8').trim()}/environ`, 'utf8'),
      30_000,
      `the environment of sandbox ${row.providerSandboxId}'s entry process`,
    );
    const env = Object.fromEntries(
      environ
        .split('\0')
        .filter(Boolean)
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    );
    return { session, workspace: join(dir, 'workspace'), dir, env };
  }

  /** git in the sandbox's workspace with the sandbox's environment; never throws. */
  async function sandboxGit(box: Sandbox, ...args: string[]) {
    try {
      // The workspace belongs to the sandbox's own uid (a root server's LOCAL sandboxes); git run
      // from the host as root would refuse it as dubious ownership.
      const env = { ...box.env, ...SAFE_DIRECTORY_ENV };
      const { stdout, stderr } = await run('git', args, { cwd: box.workspace, env });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  async function commitIn(box: Sandbox, file: string, content: string): Promise<string> {
    writeFileSync(join(box.workspace, file), content);
    await sandboxGit(box, 'add', file);
    const committed = await sandboxGit(
      box,
      '-c',
      'user.name=Agent',
      '-c',
      'user.email=a@example.com',
      'commit',
      '-q',
      '-m',
      file,
    );
    expect(committed.code).toBe(0);
    return (await sandboxGit(box, 'rev-parse', 'HEAD')).stdout.trim();
  }

  beforeAll(async () => {
    t = await startTestApp();
    repo = createTestRepo({ 'README.md': '# proxy\n' });
    const res = await t.request(CreateProjectDocument, {
      input: { name: 'proxy', repositoryUrl: repo.url, gitCredential: UPSTREAM_SECRET },
    });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.projectId;
    a = await sandboxOf(await startSession(t, projectId));
    b = await sandboxOf(await startSession(t, projectId));
  }, 300_000);
  afterAll(async () => t?.stop());

  test("the workspace's origin is the API's git proxy and its credential helper is singulacomp", async () => {
    const origin = (await sandboxGit(a, 'remote', 'get-url', 'origin')).stdout.trim();
    expect(origin).toBe(`${a.env.SINGULACOMP_API_URL}/v1/git/${projectId}.git`);
    const helper = (
      await sandboxGit(a, 'config', '--get-urlmatch', 'credential.helper', origin)
    ).stdout.trim();
    expect(helper).toBe('!singulacomp git-credential');
  });

  test('git push origin HEAD lands on the session branch upstream', async () => {
    const head = await commitIn(a, 'a.txt', 'from session a\n');
    const pushed = await sandboxGit(a, 'push', 'origin', 'HEAD');
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(repo.branches()[a.session.sessionId]).toBe(head);
  });

  test.each([
    ['the default branch', ['HEAD:refs/heads/main'], 'the default branch main is written only by merging'],
    ["another session's branch", () => [`HEAD:refs/heads/${b.session.sessionId}`], 'is not this session'],
    ['a new branch', ['HEAD:refs/heads/feature-x'], 'refs/heads/feature-x is not this session'],
    ['a tag', ['HEAD:refs/tags/v1'], 'refs/tags/v1 is not this session'],
    ['a delete', () => [`:refs/heads/${a.session.sessionId}`], 'deleting refs is not allowed'],
  ])(
    'a push to %s is refused with a message naming the allowed ref',
    async (_name, refspecs, reason) => {
      const before = git(repo.url, 'for-each-ref', '--format=%(refname) %(objectname)');
      await commitIn(a, `refused-${Math.random()}.txt`, 'x\n');
      const specs = typeof refspecs === 'function' ? refspecs() : refspecs;
      const pushed = await sandboxGit(a, 'push', 'origin', ...specs);
      expect(pushed.code).not.toBe(0);
      expect(pushed.stderr).toContain(reason);
      expect(pushed.stderr).toContain(`This session may push only refs/heads/${a.session.sessionId}`);
      expect(git(repo.url, 'for-each-ref', '--format=%(refname) %(objectname)')).toBe(before);
    },
    60_000,
  );

  test('a force push that rewrites the session branch is refused and the branch keeps its commit', async () => {
    // The branch must hold the sandbox's HEAD first: had this push failed, the rewrite below would
    // descend from the branch's older commit, and its push be a plain fast-forward.
    const first = await sandboxGit(a, 'push', 'origin', 'HEAD');
    expect(first.code, first.stderr).toBe(0);
    const upstream = repo.branches()[a.session.sessionId];
    expect(upstream).toBe((await sandboxGit(a, 'rev-parse', 'HEAD')).stdout.trim());
    await sandboxGit(a, 'reset', '-q', '--hard', 'HEAD~1');
    await commitIn(a, 'rewrite.txt', 'rewritten\n');
    const pushed = await sandboxGit(a, 'push', '--force', 'origin', 'HEAD');
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toMatch(/non-fast-forward/);
    expect(repo.branches()[a.session.sessionId]).toBe(upstream);
    await sandboxGit(a, 'reset', '-q', '--hard', upstream!);
  });

  test('a refusal by the upstream is reported and leaves the mirror as the upstream is', async () => {
    const hook = join(repo.url, 'hooks', 'pre-receive');
    writeFileSync(hook, '#!/bin/sh\necho "policy: pushes frozen" >&2\nexit 1\n');
    chmodSync(hook, 0o755);
    try {
      const upstream = repo.branches()[b.session.sessionId];
      await commitIn(b, 'b.txt', 'from b\n');
      const pushed = await sandboxGit(b, 'push', 'origin', 'HEAD');
      expect(pushed.code).not.toBe(0);
      expect(pushed.stderr).toContain('the upstream refused it');
      expect(repo.branches()[b.session.sessionId]).toBe(upstream);
    } finally {
      rmSync(hook);
    }
    // The mirror was rolled back, so the same push goes through once the upstream accepts it.
    const retried = await sandboxGit(b, 'push', 'origin', 'HEAD');
    expect(retried.code, retried.stderr).toBe(0);
    expect(repo.branches()[b.session.sessionId]).toBe(
      (await sandboxGit(b, 'rev-parse', 'HEAD')).stdout.trim(),
    );
  });

  test('fetching through the proxy brings commits pushed upstream by someone else', async () => {
    git(repo.workdir, 'fetch', '-q', 'origin', a.session.sessionId);
    git(repo.workdir, 'checkout', '-q', '-B', 'side', 'FETCH_HEAD');
    writeFileSync(join(repo.workdir, 'side.txt'), 'side\n');
    git(repo.workdir, 'add', 'side.txt');
    git(repo.workdir, 'commit', '-q', '-m', 'side');
    git(repo.workdir, 'push', '-q', 'origin', `HEAD:refs/heads/${a.session.sessionId}`);
    git(repo.workdir, 'checkout', '-q', 'main');
    const pulled = await sandboxGit(a, 'pull', '--ff-only', 'origin', a.session.sessionId);
    expect(pulled.code, pulled.stderr).toBe(0);
    expect((await sandboxGit(a, 'rev-parse', 'HEAD')).stdout.trim()).toBe(
      repo.branches()[a.session.sessionId],
    );
  });

  test('no upstream credential or upstream location is in the environment or any file of the sandbox', async () => {
    const offenders: string[] = [];
    const walk = (path: string) => {
      const stat = statSync(path);
      if (stat.isDirectory()) {
        for (const entry of readdirSync(path)) walk(join(path, entry));
        return;
      }
      const text = readFileSync(path).toString('latin1');
      if (text.includes(UPSTREAM_SECRET) || text.includes(repo.url)) offenders.push(path);
    };
    walk(a.dir);
    expect(offenders).toEqual([]);
    const environment = JSON.stringify(a.env);
    expect(environment).not.toContain(UPSTREAM_SECRET);
    expect(environment).not.toContain(repo.url);
    expect(readFileSync(join(a.workspace, '.git', 'config'), 'utf8')).not.toMatch(/:\/\/[^/\s]*@/);
  });

  test('the proxy asks for credentials, and refuses tokens of other accounts and projects', async () => {
    const url = `${t.url}/v1/git/${projectId}.git/info/refs?service=git-upload-pack`;
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toContain('Basic');
    const other = await t.seedAccount();
    const foreign = await fetch(url, { headers: { authorization: `Bearer ${other.token}` } });
    expect(foreign.status).toBe(404);
    const basic = Buffer.from(`x:${a.session.token}`).toString('base64');
    const own = await fetch(url, { headers: { authorization: `Basic ${basic}` } });
    expect(own.status).toBe(200);
    expect(own.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
    const body = await own.text();
    expect(body).toContain(`refs/heads/${a.session.sessionId}`);
    expect(body).not.toContain('refs/mirror');
  });

  test('the credential helper hands the token only to the API origin', async () => {
    const ask = async (request: string) => {
      const child = execFile('singulacomp', ['git-credential', 'get'], { env: a.env });
      child.stdin?.end(request);
      let out = '';
      child.stdout?.on('data', (chunk) => {
        out += chunk;
      });
      await new Promise((resolve) => child.once('close', resolve));
      return out;
    };
    const api = new URL(a.env.SINGULACOMP_API_URL!);
    expect(await ask(`protocol=http\nhost=${api.host}\n\n`)).toBe(
      `username=singulacomp\npassword=${a.env.SINGULACOMP_TOKEN}\n`,
    );
    expect(await ask('protocol=https\nhost=github.com\n\n')).toBe('');
    expect(await ask(`protocol=https\nhost=${api.host}\n\n`)).toBe('');
  });
});
