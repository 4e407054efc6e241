// `singulacomp sessions reload` end to end: a real LOCAL sandbox with the real daemon and OpenCode.
// The document's exact command runs with the sandbox's own environment (read from /proc), the live
// view runs in a terminal (tmux) for a user, and a failed phase makes the command exit non-zero.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentSessionDocument } from '../generated/graphql';
import { OPENCODE_CONFIG_SUBDIR } from '../fixtures/opencode-project';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { type E2e, startE2e } from '../e2e/helpers';
import { git } from '../support/git';
import { waitFor } from '../support/wait';
import { cliPath, startPane } from './helpers';

const DOCUMENT_COMMAND =
  'singulacomp sessions reload "$SINGULACOMP_SESSION_ID" --project "$SINGULACOMP_PROJECT_ID" --no-repo --force --yes';

describe('singulacomp sessions reload', () => {
  let e: E2e;
  let s: LiveSession;
  let projectId: string;
  let workspace: string;
  let sandboxEnv: Record<string, string>;

  /** A shell command run in the sandbox's workspace with the sandbox's environment. */
  function inSandbox(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        '/bin/sh',
        ['-c', command],
        { cwd: workspace, env: sandboxEnv, timeout: 400_000 },
        (error, stdout, stderr) => {
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
        },
      );
    });
  }

  beforeAll(async () => {
    e = await startE2e({ daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
    projectId = await createProject(e.t, e.repo.url);
    s = await startSession(e.t, projectId);
    const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    workspace = join(e.sandboxDir(sandbox.providerSandboxId!), 'workspace');
    const pid = await e.daemonPid(sandbox.providerSandboxId!);
    sandboxEnv = Object.fromEntries(
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    );
    await waitFor(async () => {
      const v = await e.t.request(AgentSessionDocument, { id: s.sessionId });
      return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
    }, 90_000);
  });
  afterAll(async () => e?.stop());

  test("the document's command runs inside the sandbox on SINGULACOMP_TOKEN and prints each phase in order", async () => {
    expect(sandboxEnv.SINGULACOMP_TOKEN).toBe(s.token);
    const result = await inSandbox(DOCUMENT_COMMAND);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual([
      'CHECK_SESSION ok',
      'COMPILE_AGENT_CONFIG ok',
      'APPLY_RUNTIME ok',
      'VALIDATE_RUNTIME ok',
      'CONFIRM_CONFIG ok',
      'reload succeeded',
    ]);
    const reload = await e.t.app.services.db.reload.findFirstOrThrow({
      where: { sessionId: s.sessionId },
      orderBy: { createdAt: 'desc' },
    });
    expect(reload).toMatchObject({ status: 'SUCCEEDED', noRepo: true, force: true });
  });

  test('a sandbox token cannot reload another session', async () => {
    const result = await inSandbox(
      `singulacomp sessions reload 00000000-0000-4000-8000-000000000000 --project "$SINGULACOMP_PROJECT_ID" --yes`,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/FORBIDDEN|No session/);
  });

  test('on a terminal a user sees the phases live, and without --no-repo the workspace pulls the session branch through the proxy', async () => {
    // Someone pushes to the session branch upstream; the reload's REFRESH_REPOSITORY must bring it in.
    git(e.repo.workdir, 'fetch', '-q', 'origin', s.sessionId);
    git(e.repo.workdir, 'checkout', '-q', '-B', 'upstream-work', 'FETCH_HEAD');
    writeFileSync(join(e.repo.workdir, 'pushed.txt'), 'from upstream\n');
    git(e.repo.workdir, 'add', 'pushed.txt');
    git(e.repo.workdir, 'commit', '-q', '-m', 'upstream work');
    git(e.repo.workdir, 'push', '-q', 'origin', `HEAD:refs/heads/${s.sessionId}`);
    const pushed = git(e.repo.workdir, 'rev-parse', 'HEAD');
    git(e.repo.workdir, 'checkout', '-q', 'main');

    const pane = startPane(
      [cliPath(e.t.dataDir), 'sessions', 'reload', s.sessionId, '--project', projectId, '--force', '--yes'],
      { HOME: e.t.dataDir, SINGULACOMP_API_URL: e.t.url, SINGULACOMP_TOKEN: e.t.adminToken },
    );
    try {
      const code = await pane.exitCode(400_000);
      expect(code, pane.text()).toBe(0);
      const screen = pane.text();
      const lines = screen.split('\n').filter((line) => line.startsWith('✔') || line.startsWith('Reload'));
      expect(lines).toEqual([
        '✔ CHECK_SESSION',
        '✔ REFRESH_REPOSITORY',
        '✔ COMPILE_AGENT_CONFIG',
        '✔ APPLY_RUNTIME',
        '✔ VALIDATE_RUNTIME',
        '✔ CONFIRM_CONFIG',
        'Reload succeeded.',
      ]);
    } finally {
      pane.kill();
    }
    expect(git(workspace, 'rev-parse', 'HEAD')).toBe(pushed);
    expect(readFileSync(join(workspace, 'pushed.txt'), 'utf8')).toBe('from upstream\n');
  });

  test('a failed phase is shown with its reason and the command exits non-zero', async () => {
    // Valid JSON (so it compiles) that OpenCode's own schema rejects when the replacement boots.
    writeFileSync(join(workspace, OPENCODE_CONFIG_SUBDIR, 'opencode.json'), '{ "model": 5 }\n');
    const plain = await inSandbox(DOCUMENT_COMMAND);
    expect(plain.code).toBe(1);
    expect(plain.stdout).toContain('VALIDATE_RUNTIME failed:');
    expect(plain.stdout).not.toContain('CONFIRM_CONFIG ok');

    const scripted = await inSandbox(`${DOCUMENT_COMMAND.replace('singulacomp', 'singulacomp --json')}`);
    expect(scripted.code).toBe(1);
    const reload = JSON.parse(scripted.stdout) as {
      status: string;
      phases: Array<{ name: string; status: string }>;
    };
    expect(reload.status).toBe('FAILED');
    expect(reload.phases.at(-1)).toMatchObject({ name: 'VALIDATE_RUNTIME', status: 'FAILED' });
  }, 240_000);
});
