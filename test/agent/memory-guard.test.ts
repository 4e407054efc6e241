import { describe } from 'vitest';
import type { MemoryReading } from '../../agent/telemetry';
import { expect, test, waitFor } from './helpers';

const GiB = 1024 ** 3;

describe('memory guard', () => {
  test('aborts a real busy turn at the threshold and reports SandboxMemoryGuard with the numbers', async ({
    startAgent,
  }) => {
    const reading: MemoryReading = { usedBytes: 2 * GiB, limitBytes: 4 * GiB };
    const h = await startAgent({
      prompt: 'A long turn.',
      stub: { delayMs: 30_000 },
      agent: { readers: { memory: async () => ({ ...reading }) }, memoryGuardPct: 92 },
    });
    await waitFor(() => h.states().includes('BUSY'), 20_000, 'BUSY');
    const opencode = h.agent.supervisor.current!.client;
    const sessionId = h.agent.supervisor.initialSessionId!;
    expect(await opencode.sessionStatus()).toEqual({ [sessionId]: { type: 'busy' } });
    const startedAt = Date.now();

    // 90 % is above the fast-sampling line but below the guard: nothing happens.
    reading.usedBytes = Math.round(4 * GiB * 0.9);
    await waitFor(() => Math.abs(h.agent.memoryGuard.lastPct - 90) < 0.01, 10_000, 'a sample at 90 %');
    expect(h.agent.memoryGuard.trips).toBe(0);

    reading.usedBytes = Math.round(4 * GiB * 0.95);
    await waitFor(() => h.states().includes('ERROR'), 10_000, 'ERROR');
    expect(Date.now() - startedAt).toBeLessThan(10_000);

    const error = h.api.of('reportRuntimeState').find((call) => call.input.state === 'ERROR')!;
    const message = String(error.input.message);
    expect(message).toContain('SandboxMemoryGuard');
    expect(message).toContain('95.0%');
    expect(message).toContain(`used ${Math.round(4 * GiB * 0.95)} of ${4 * GiB} bytes`);
    expect(message).toContain('92% guard threshold');

    const guardSample = await waitFor(
      () => h.api.of('reportTelemetry').find((call) => call.input.reason === 'MEMORY_GUARD'),
      5_000,
      'MEMORY_GUARD telemetry',
    );
    expect(guardSample!.input).toMatchObject({
      memoryUsedBytes: Math.round(4 * GiB * 0.95),
      memoryLimitBytes: 4 * GiB,
    });

    // The abort went through OpenCode: the turn is over there and its assistant message says aborted.
    await waitFor(
      async () => Object.keys(await opencode.sessionStatus()).length === 0,
      10_000,
      'opencode idle',
    );
    // OpenCode may report the session idle a moment before it stores the message's error.
    const aborted = await waitFor(
      async () => {
        const messages = (await (
          await fetch(`${opencode.baseUrl}/session/${sessionId}/message`)
        ).json()) as Array<{ info: { role: string; error?: { name: string } } }>;
        return messages.find((m) => m.info.role === 'assistant' && m.info.error)?.info.error;
      },
      10_000,
      "the assistant message's error",
    );
    expect(aborted.name).toBe('MessageAbortedError');

    // The lease is released and the aborted turn's idle does not overwrite the error.
    await waitFor(() => h.api.of('releaseLease').length > 0, 5_000, 'lease release');
    await waitFor(() => !h.agent.tracker.turnInFlight, 5_000, 'the turn to end in the tracker');
    await h.agent.flushReports();
    expect(h.states().at(-1)).toBe('ERROR');
    expect(h.agent.memoryGuard.trips).toBe(1);
  });
});
