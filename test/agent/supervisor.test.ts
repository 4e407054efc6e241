import { readFile } from 'node:fs/promises';
import { describe } from 'vitest';
import { OpencodeClient } from '../../agent/opencode';
import { expect, test, waitFor } from './helpers';

describe('supervisor', () => {
  test('boot claims the bootstrap, starts opencode, reports HEALTHY and sends the initial prompt', async ({
    startAgent,
  }) => {
    const h = await startAgent({ prompt: 'Write the release notes.' });
    const ops = h.api.calls.map((call) => call.operation);
    expect(ops[0]).toBe('claimBootstrap');
    expect(h.api.calls[0]!.authorization).toBe(`Bearer ${h.token}`);
    expect(h.states().slice(0, 2)).toEqual(['STARTING', 'HEALTHY']);

    // The prompt reached the model through a real OpenCode session.
    await waitFor(
      () => h.stub.requests.some((r) => JSON.stringify(r.messages).includes('Write the release notes.')),
      30_000,
      'the prompt at the model',
    );
    const opencode = h.agent.supervisor.current!;
    const sessionId = h.agent.supervisor.initialSessionId!;
    const messages = (await (
      await fetch(`${opencode.client.baseUrl}/session/${sessionId}/message`)
    ).json()) as Array<{
      parts: Array<{ type: string; text?: string }>;
    }>;
    expect(messages[0]!.parts.find((p) => p.type === 'text')!.text).toBe('Write the release notes.');

    // OpenCode runs with the project's config dir and a HOME outside the workspace.
    const environ = await readFile(`/proc/${opencode.pid}/environ`, 'utf8');
    expect(environ.split('\0')).toContain(`OPENCODE_CONFIG_DIR=${h.workspace}/.singulacomp/opencode`);
    expect(environ.split('\0')).toContain(`HOME=${h.home}`);
    // A health request that times out while OpenCode is busy on a loaded host is asked again.
    const health = await waitFor(
      () => new OpencodeClient(opencode.client.baseUrl).health(),
      30_000,
      'an answer from OpenCode /global/health',
    );
    expect(health).toMatchObject({ healthy: true });

    // The turn drove the state machine through BUSY back to IDLE.
    await waitFor(() => h.states().includes('IDLE'), 30_000, 'IDLE');
    expect(h.states()).toContain('BUSY');
  });

  test('a restarted daemon whose bootstrap was already claimed does not resend the prompt', async ({
    startAgent,
  }) => {
    const h = await startAgent({ prompt: 'Never sent twice.', alreadyClaimed: true });
    expect(h.agent.supervisor.bootstrap?.alreadyClaimed).toBe(true);
    expect(h.agent.supervisor.initialSessionId).toBeNull();
    expect(h.stub.requests).toHaveLength(0);
  });

  test('killing opencode restarts it with a growing backoff and reports the states', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    // A runtime is reported HEALTHY once its event stream is connected, a moment after the
    // supervisor saw it healthy: each kill waits for that report, as a user's first turn would.
    const healthyReports = (n: number) => h.states().filter((state) => state === 'HEALTHY').length >= n;
    await waitFor(() => healthyReports(1), 30_000, 'first HEALTHY report');
    const first = h.agent.supervisor.current!;
    process.kill(first.pid!, 'SIGKILL');
    await waitFor(
      () => h.agent.supervisor.current !== first && healthyReports(2),
      30_000,
      'first restart reported HEALTHY',
    );
    const second = h.agent.supervisor.current!;
    expect(second.pid).not.toBe(first.pid);
    process.kill(second.pid!, 'SIGKILL');
    await waitFor(
      () => h.agent.supervisor.current !== second && healthyReports(3),
      30_000,
      'second restart reported HEALTHY',
    );
    const delays = h.agent.supervisor.restarts.map((r) => r.delayMs);
    expect(delays).toEqual([300, 600]);
    expect(h.agent.supervisor.restarts[0]!.reason).toContain('signal SIGKILL');
    expect(h.states()).toEqual([
      'STARTING',
      'HEALTHY',
      'ERROR',
      'STARTING',
      'HEALTHY',
      'ERROR',
      'STARTING',
      'HEALTHY',
    ]);
    const health = await fetch(`${h.url}/singulacomp/health`);
    expect(health.status).toBe(200);
  });
});
