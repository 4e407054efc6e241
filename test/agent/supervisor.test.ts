import { readFile } from 'node:fs/promises';
import { describe } from 'vitest';
import { OpencodeClient } from '../../agent/opencode';
import { createFakeClock } from '../support/clock';
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

  test('OpenCode starts and becomes healthy while the bootstrap claim is still unanswered', async ({
    startAgent,
  }) => {
    let answerClaim = () => {};
    const claimHeld = new Promise<void>((resolve) => {
      answerClaim = resolve;
    });
    const h = await startAgent({ prompt: 'Sent after the claim.', claimHeld, start: false });
    const started = h.agent.start();
    await waitFor(() => h.states().includes('HEALTHY'), 60_000, 'HEALTHY before the claim is answered');
    expect(h.agent.supervisor.bootstrap).toBeNull();
    expect(h.stub.requests).toHaveLength(0);
    // Once claimed, the initial prompt follows.
    answerClaim();
    await started;
    expect(h.agent.supervisor.bootstrap?.prompt).toBe('Sent after the claim.');
    await waitFor(
      () => h.stub.requests.some((r) => JSON.stringify(r.messages).includes('Sent after the claim.')),
      30_000,
      'the prompt at the model',
    );
  });

  test("OpenCode starts on the gateway's models the server listed, without asking the gateway", async ({
    startAgent,
  }) => {
    const h = await startAgent({ agent: { gatewayModels: ['listed-model'] } });
    await h.agent.flushReports();
    expect(h.states().slice(0, 2)).toEqual(['STARTING', 'HEALTHY']);
    const environ = await readFile(`/proc/${h.agent.supervisor.current!.pid}/environ`, 'utf8');
    const content = environ.split('\0').find((entry) => entry.startsWith('OPENCODE_CONFIG_CONTENT='));
    const config = JSON.parse(content!.slice('OPENCODE_CONFIG_CONTENT='.length)) as {
      provider: Record<string, { options: { baseURL: string; apiKey: string }; models: object }>;
    };
    expect(Object.keys(config.provider.singulacomp!.models)).toEqual(['listed-model']);
    expect(config.provider.singulacomp!.options).toEqual({
      baseURL: `${h.api.url}/v1/llm/openai/v1`,
      apiKey: h.token,
    });
    expect(h.api.otherPaths).toEqual([]);
  });

  test('told the gateway serves no models, OpenCode starts on the project’s own providers at once', async ({
    startAgent,
  }) => {
    const h = await startAgent({ agent: { gatewayModels: [] } });
    await h.agent.flushReports();
    expect(h.states().slice(0, 2)).toEqual(['STARTING', 'HEALTHY']);
    expect(h.api.otherPaths).toEqual([]);
    const environ = await readFile(`/proc/${h.agent.supervisor.current!.pid}/environ`, 'utf8');
    expect(environ).not.toContain('OPENCODE_CONFIG_CONTENT=');
  });

  test('without a listed model the daemon asks the gateway before OpenCode starts', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    expect(h.api.otherPaths).toEqual(['/v1/llm/openai/v1/models']);
    // The recording API lists none: OpenCode keeps the workspace's own provider.
    const environ = await readFile(`/proc/${h.agent.supervisor.current!.pid}/environ`, 'utf8');
    expect(environ).not.toContain('OPENCODE_CONFIG_CONTENT=');
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
    // The restart backoff runs on a fake clock: each wait passes when the test advances it, to the
    // millisecond, instead of in real time.
    const clock = createFakeClock();
    const h = await startAgent({ agent: { clock } });
    const supervisor = h.agent.supervisor;
    // A runtime is reported HEALTHY once its event stream is connected, a moment after the
    // supervisor saw it healthy: each kill waits for that report, as a user's first turn would.
    const healthyReports = (n: number) => h.states().filter((state) => state === 'HEALTHY').length >= n;
    await waitFor(() => healthyReports(1), 30_000, 'first HEALTHY report');

    const killAndRestart = async (n: number, delayMs: number): Promise<void> => {
      const before = supervisor.current!;
      process.kill(before.pid!, 'SIGKILL');
      await waitFor(() => supervisor.restarts.length === n, 30_000, `restart ${n} scheduled`);
      expect(supervisor.restarts[n - 1]!.delayMs).toBe(delayMs);
      expect(supervisor.restarts[n - 1]!.at).toBe(clock.now());
      // One millisecond short of the backoff nothing starts; at the backoff the restart begins.
      clock.advance(delayMs - 1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(supervisor.current).toBe(before);
      clock.advance(1);
      await waitFor(
        () => supervisor.current !== before && healthyReports(n + 1),
        30_000,
        `restart ${n} reported HEALTHY`,
      );
      expect(supervisor.current!.pid).not.toBe(before.pid);
    };
    await killAndRestart(1, 300);
    await killAndRestart(2, 600);

    expect(supervisor.restarts.map((r) => r.delayMs)).toEqual([300, 600]);
    expect(supervisor.restarts[0]!.reason).toContain('signal SIGKILL');
    // Both restarts came within the stability window: the backoff was never reset.
    expect(supervisor.restarts[1]!.at - supervisor.restarts[0]!.at).toBe(300);
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

  test('a runtime that stays up for the stability window resets the restart backoff', async ({
    startAgent,
  }) => {
    const clock = createFakeClock();
    const h = await startAgent({ agent: { clock, stableAfterMs: 60_000 } });
    const supervisor = h.agent.supervisor;
    await waitFor(() => h.states().includes('HEALTHY'), 30_000, 'HEALTHY');
    const first = supervisor.current!;
    process.kill(first.pid!, 'SIGKILL');
    await waitFor(() => supervisor.restarts.length === 1, 30_000, 'restart scheduled');
    clock.advance(300);
    await waitFor(() => supervisor.current !== first && supervisor.healthy, 30_000, 'restarted');
    // A full stability window of fake time: the next crash starts over at the initial delay.
    clock.advance(60_000);
    const second = supervisor.current!;
    process.kill(second.pid!, 'SIGKILL');
    await waitFor(() => supervisor.restarts.length === 2, 30_000, 'second restart scheduled');
    expect(supervisor.restarts.map((r) => r.delayMs)).toEqual([300, 300]);
    clock.advance(300);
    await waitFor(() => supervisor.current !== second && supervisor.healthy, 30_000, 'restarted again');
  });
});
