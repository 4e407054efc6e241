import { execFileSync } from 'node:child_process';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe } from 'vitest';
import type { OpencodeProcess } from '../../agent/opencode';
import { expect, type TestAgent, test, waitFor } from './helpers';

const HEADER = 'x-singulacomp-user-context';

function phases(h: TestAgent, reloadId: string): string[] {
  return h.api
    .of('reportReloadPhase')
    .filter((call) => call.input.reloadId === reloadId)
    .map((call) => `${call.input.phase}:${call.input.status}`);
}

async function reload(h: TestAgent, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${h.url}/singulacomp/reload`, {
    method: 'POST',
    headers: { [HEADER]: h.userContext(), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe('reload', () => {
  test('pulls the session branch, swaps in a healthy replacement and reports every phase', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    // The workspace is a clone of an origin that has the session branch.
    const git = (cwd: string, ...args: string[]) =>
      execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
        cwd,
        stdio: 'pipe',
      });
    const origin = join(h.workspace, '..', 'origin.git');
    const other = join(h.workspace, '..', 'other');
    execFileSync('git', ['init', '-q', '--bare', origin]);
    git(h.workspace, 'init', '-q', '-b', h.sessionId);
    git(h.workspace, 'add', '.singulacomp/opencode/opencode.json');
    git(h.workspace, 'commit', '-q', '-m', 'config');
    git(h.workspace, 'remote', 'add', 'origin', origin);
    git(h.workspace, 'push', '-q', 'origin', `HEAD:refs/heads/${h.sessionId}`);
    execFileSync('git', ['clone', '-q', '-b', h.sessionId, origin, other]);
    await writeFile(join(other, 'NOTES.md'), 'pushed from a parallel session\n');
    git(other, 'add', 'NOTES.md');
    git(other, 'commit', '-q', '-m', 'notes');
    git(other, 'push', '-q', 'origin', h.sessionId);

    const old = h.agent.supervisor.current!;
    const configured = h.agent.supervisor.port;
    expect(old.port).toBe(configured);
    // Every runtime the supervisor adopts during the reload, in order.
    const adopted: OpencodeProcess[] = [];
    h.agent.supervisor.on('healthy', (proc) => adopted.push(proc));
    const res = await reload(h, { reloadId: 'reload-1', noRepo: false, force: false });
    expect(res.status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 1, 60_000, 'reload end');
    expect(h.agent.reloader.outcomes[0]).toEqual({ reloadId: 'reload-1', ok: true });
    expect(phases(h, 'reload-1')).toEqual([
      'CHECK_SESSION:STARTED',
      'CHECK_SESSION:SUCCEEDED',
      'REFRESH_REPOSITORY:STARTED',
      'REFRESH_REPOSITORY:SUCCEEDED',
      'COMPILE_AGENT_CONFIG:STARTED',
      'COMPILE_AGENT_CONFIG:SUCCEEDED',
      'APPLY_RUNTIME:STARTED',
      'APPLY_RUNTIME:SUCCEEDED',
      'VALIDATE_RUNTIME:STARTED',
      'VALIDATE_RUNTIME:SUCCEEDED',
      'CONFIRM_CONFIG:STARTED',
      'CONFIRM_CONFIG:SUCCEEDED',
    ]);
    expect(await readFile(join(h.workspace, 'NOTES.md'), 'utf8')).toBe('pushed from a parallel session\n');

    // The replacement proved itself on a temporary port, then OpenCode moved back to its own.
    const fresh = h.agent.supervisor.current!;
    expect(fresh).not.toBe(old);
    expect(old.alive).toBe(false);
    expect(adopted).toHaveLength(2);
    const [temporary, settled] = adopted as [OpencodeProcess, OpencodeProcess];
    expect(temporary.port).not.toBe(configured);
    expect(temporary.alive).toBe(false);
    await expect(fetch(`http://127.0.0.1:${temporary.port}/global/health`)).rejects.toThrow();
    expect(settled).toBe(fresh);
    expect(fresh.port).toBe(configured);
    expect(fresh.alive).toBe(true);
    // The proxy now reaches the replacement.
    const session = (await (
      await fetch(`${h.url}/session`, {
        method: 'POST',
        headers: { [HEADER]: h.userContext({ audience: 'opencode' }), 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as { id: string };
    const listed = (await (await fetch(`http://127.0.0.1:${configured}/session`)).json()) as Array<{
      id: string;
    }>;
    expect(listed.map((s) => s.id)).toContain(session.id);
    expect((await fetch(`${h.url}/singulacomp/health`)).status).toBe(200);
  });

  test('when OpenCode cannot come back on its port, the validated replacement keeps serving and a restart returns to the port', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    const configured = h.agent.supervisor.port;
    // A replacement binary that is the real OpenCode, except that it refuses the configured port.
    const picky = join(h.workspace, '..', 'opencode-refusing-its-port');
    await writeFile(
      picky,
      `#!/bin/sh\ncase " $* " in *" --port ${configured} "*) echo refused >&2; exit 3;; esac\nexec '${h.agent.supervisor.bin}' "$@"\n`,
    );
    await chmod(picky, 0o755);
    h.agent.replacementBin = picky;
    const old = h.agent.supervisor.current!;

    expect((await reload(h, { reloadId: 'reload-moved', noRepo: true })).status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 1, 60_000, 'reload end');
    const outcome = h.agent.reloader.outcomes[0]!;
    expect(outcome).toMatchObject({ reloadId: 'reload-moved', ok: true });
    expect(outcome.message).toContain(`did not come up`);
    const confirmed = h.api
      .of('reportReloadPhase')
      .find((call) => call.input.phase === 'CONFIRM_CONFIG' && call.input.status === 'SUCCEEDED')!;
    expect(String(confirmed.input.message)).toContain(`port ${configured} did not come up`);

    const serving = h.agent.supervisor.current!;
    expect(old.alive).toBe(false);
    expect(serving).not.toBe(old);
    expect(serving.alive).toBe(true);
    expect(serving.port).not.toBe(configured);
    const res = await fetch(`${h.url}/session`, {
      headers: { [HEADER]: h.userContext({ audience: 'opencode' }) },
    });
    expect(res.status).toBe(200);

    // The supervisor restarts a runtime that died on the configured port, with its own binary.
    serving.signal('SIGKILL');
    const restarted = await waitFor(
      () => {
        const current = h.agent.supervisor.current;
        return current !== serving && h.agent.supervisor.healthy && current?.alive ? current : null;
      },
      60_000,
      'the restart',
    );
    expect(restarted.port).toBe(configured);
    expect((await fetch(`http://127.0.0.1:${configured}/global/health`)).status).toBe(200);
  });

  test('a replacement that never becomes healthy fails VALIDATE_RUNTIME and the old runtime keeps serving', async ({
    startAgent,
  }) => {
    const h = await startAgent({ agent: { reloadValidateTimeoutMs: 1_500 } });
    // A replacement binary that starts but never answers health checks.
    const hang = join(h.workspace, '..', 'opencode-that-hangs');
    // Its arguments carry a path unique to this test, so the process check below sees only it.
    await writeFile(`${hang}.log`, '');
    await writeFile(hang, `#!/bin/sh\nexec tail -f ${hang}.log\n`);
    await chmod(hang, 0o755);
    h.agent.replacementBin = hang;
    const old = h.agent.supervisor.current!;

    expect((await reload(h, { reloadId: 'reload-bad', noRepo: true })).status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 1, 20_000, 'reload end');
    const outcome = h.agent.reloader.outcomes[0]!;
    expect(outcome).toMatchObject({ ok: false, failedPhase: 'VALIDATE_RUNTIME' });
    expect(phases(h, 'reload-bad')).toEqual([
      'CHECK_SESSION:STARTED',
      'CHECK_SESSION:SUCCEEDED',
      'COMPILE_AGENT_CONFIG:STARTED',
      'COMPILE_AGENT_CONFIG:SUCCEEDED',
      'APPLY_RUNTIME:STARTED',
      'APPLY_RUNTIME:SUCCEEDED',
      'VALIDATE_RUNTIME:STARTED',
      'VALIDATE_RUNTIME:FAILED',
    ]);
    const failed = h.api.of('reportReloadPhase').find((call) => call.input.status === 'FAILED')!;
    expect(String(failed.input.message)).toContain('did not become healthy within 1500 ms');

    expect(h.agent.supervisor.current).toBe(old);
    expect(old.alive).toBe(true);
    const res = await fetch(`${h.url}/session`, {
      headers: { [HEADER]: h.userContext({ audience: 'opencode' }) },
    });
    expect(res.status).toBe(200);
    expect((await fetch(`${h.url}/singulacomp/health`)).status).toBe(200);
    // The hung replacement was killed.
    expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toContain(`${hang}.log`);
  });

  test('a broken agent config fails COMPILE_AGENT_CONFIG before any runtime is started', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    await writeFile(join(h.workspace, '.singulacomp', 'opencode', 'opencode.json'), '{ "model": ');
    expect((await reload(h, { reloadId: 'reload-config', noRepo: true })).status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 1, 20_000, 'reload end');
    expect(phases(h, 'reload-config').at(-1)).toBe('COMPILE_AGENT_CONFIG:FAILED');
    expect((await reload(h, { noRepo: true })).status).toBe(400);
  });

  test('a forced reload ends the running turn and releases its lease; without force it is refused', async ({
    startAgent,
  }) => {
    const h = await startAgent({ prompt: 'A long turn.', stub: { delayMs: 30_000 } });
    await waitFor(() => h.states().includes('BUSY'), 20_000, 'BUSY');
    expect((await reload(h, { reloadId: 'reload-busy', noRepo: true })).status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 1, 20_000, 'refused reload');
    expect(phases(h, 'reload-busy')).toEqual(['CHECK_SESSION:STARTED', 'CHECK_SESSION:FAILED']);

    const before = h.states().length;
    expect((await reload(h, { reloadId: 'reload-force', noRepo: true, force: true })).status).toBe(202);
    await waitFor(() => h.agent.reloader.outcomes.length === 2, 60_000, 'forced reload');
    expect(h.agent.reloader.outcomes[1]).toEqual({ reloadId: 'reload-force', ok: true });
    await waitFor(() => h.api.of('releaseLease').length > 0, 10_000, 'lease release');
    expect(h.agent.tracker.turnInFlight).toBe(false);
    // The turn ended (IDLE) on the swap; the last report is the runtime on the configured port.
    const during = h.states().slice(before);
    expect(during).toContain('IDLE');
    expect(during.lastIndexOf('HEALTHY')).toBeGreaterThan(during.indexOf('IDLE'));
    expect(during.at(-1)).toBe('HEALTHY');
    expect(await h.agent.supervisor.current!.client.sessionStatus()).toEqual({});
    expect(h.agent.supervisor.current!.port).toBe(h.agent.supervisor.port);
  });
});
