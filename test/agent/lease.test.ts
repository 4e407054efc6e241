import { describe } from 'vitest';
import { expect, test, waitFor } from './helpers';

describe('execution lease', () => {
  test('a slow turn renews the lease every interval with its generation and releases it on idle', async ({
    startAgent,
  }) => {
    // Renew interval scaled to 1 s; the model takes 4.5 s before its first token. Memory is sampled
    // every 1 s below the fast-sampling line: the samples count the agent's own timer ticks.
    let memorySamples = 0;
    const h = await startAgent({
      prompt: 'Take your time.',
      stub: { delayMs: 4_500 },
      agent: {
        readers: {
          memory: async () => {
            memorySamples += 1;
            return { usedBytes: 1024 ** 3, limitBytes: 4 * 1024 ** 3 };
          },
        },
      },
    });
    await waitFor(() => h.api.of('releaseLease').length > 0, 40_000, 'the lease release');

    const renewals = h.api.of('renewLease');
    expect(renewals.length).toBeGreaterThanOrEqual(4);
    // Acquired without a generation (under a key its retries repeat), then renewed with the
    // generation the API handed out.
    expect(renewals[0]!.input).toEqual({ sessionId: h.sessionId, acquisition: expect.any(String) });
    for (const renewal of renewals.slice(1))
      expect(renewal.input).toEqual({ sessionId: h.sessionId, generation: 1 });
    const gaps = renewals.slice(1).map((r, i) => r.at - renewals[i]!.at);
    for (const gap of gaps) expect(gap).toBeGreaterThan(700);
    expect(h.api.of('releaseLease')[0]!.input).toEqual({ sessionId: h.sessionId, generation: 1 });
    expect(h.api.lease.released).toBe(true);

    // No renewals after the release, and the states went BUSY → IDLE: two more samples on the
    // agent's 1 s timer mean a renewal interval has passed since.
    const count = h.api.of('renewLease').length;
    const samplesAtRelease = memorySamples;
    await waitFor(() => memorySamples >= samplesAtRelease + 2, 20_000, 'two more memory samples');
    expect(h.api.of('renewLease')).toHaveLength(count);
    const states = h.states();
    expect(states.indexOf('BUSY')).toBeGreaterThan(states.indexOf('HEALTHY'));
    expect(states.at(-1)).toBe('IDLE');
    expect(h.agent.lease.held).toBe(false);
  });

  test('a fenced renewal acquires a fresh generation instead of renewing the stale one', async ({
    startAgent,
  }) => {
    const h = await startAgent({ prompt: 'Slow again.', stub: { delayMs: 3_500 } });
    await waitFor(() => h.api.of('renewLease').length >= 1, 20_000, 'the first renewal');
    // Another process (a reaper, a second daemon) moved the generation on.
    h.api.lease.generation = 7;
    await waitFor(
      () => h.api.of('renewLease').some((call) => call.input.generation === 8),
      20_000,
      'renewal with the new generation',
    );
    const inputs = h.api.of('renewLease').map((call) => call.input.generation ?? null);
    const fencedAt = inputs.indexOf(1, 1);
    expect(inputs.slice(fencedAt + 1)).toContain(null);
    await waitFor(() => h.api.of('releaseLease').length > 0, 30_000, 'the release');
    expect(h.api.of('releaseLease')[0]!.input.generation).toBe(8);
  });
});
