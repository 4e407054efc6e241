import { describe } from 'vitest';
import { createFakeClock } from '../support/clock';
import { expect, test, waitFor } from './helpers';

// The lease keeper runs on a fake clock: a renew interval passes when the test advances it, so the
// renewals are counted per interval exactly, with no real seconds spent waiting for them.
const INTERVAL = 1_000;

describe('execution lease', () => {
  test('a busy turn renews the lease every interval with its generation and releases it on idle', async ({
    startAgent,
  }) => {
    const clock = createFakeClock();
    const h = await startAgent({
      prompt: 'Take your time.',
      start: false,
      agent: { clock, leaseRenewIntervalMs: INTERVAL },
    });
    const releaseModel = h.stub.holdReplies();
    await h.agent.start();
    await waitFor(() => h.agent.lease.held, 30_000, 'the acquire as the turn starts');
    expect(h.api.of('renewLease')).toHaveLength(1);

    for (let interval = 1; interval <= 3; interval++) {
      // One millisecond short of the interval no renewal goes out; at the interval exactly one does.
      clock.advance(INTERVAL - 1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(h.api.of('renewLease')).toHaveLength(interval);
      clock.advance(1);
      await waitFor(() => h.api.of('renewLease').length === interval + 1, 20_000, `renewal ${interval}`);
    }

    const renewals = h.api.of('renewLease');
    // Acquired without a generation (under a key its retries repeat), then renewed with the
    // generation the API handed out.
    expect(renewals[0]!.input).toEqual({ sessionId: h.sessionId, acquisition: expect.any(String) });
    for (const renewal of renewals.slice(1))
      expect(renewal.input).toEqual({ sessionId: h.sessionId, generation: 1 });

    releaseModel();
    await waitFor(() => h.api.of('releaseLease').length > 0, 30_000, 'the lease release');
    expect(h.api.of('releaseLease')[0]!.input).toEqual({ sessionId: h.sessionId, generation: 1 });
    expect(h.api.lease.released).toBe(true);

    // The renew timer is gone with the release: intervals passing afterwards send nothing.
    expect(clock.pending().filter((timer) => timer.intervalMs === INTERVAL)).toEqual([]);
    clock.advance(5 * INTERVAL);
    expect(h.api.of('renewLease')).toHaveLength(4);
    const states = h.states();
    expect(states.indexOf('BUSY')).toBeGreaterThan(states.indexOf('HEALTHY'));
    await waitFor(() => h.states().at(-1) === 'IDLE', 20_000, 'IDLE reported');
    // The generation is dropped once the API answered the release.
    await waitFor(() => !h.agent.lease.held, 20_000, 'the lease let go');
    expect(h.agent.lease.generation).toBeNull();
  });

  test('a fenced renewal acquires a fresh generation instead of renewing the stale one', async ({
    startAgent,
  }) => {
    const clock = createFakeClock();
    const h = await startAgent({
      prompt: 'Slow again.',
      start: false,
      agent: { clock, leaseRenewIntervalMs: INTERVAL },
    });
    const releaseModel = h.stub.holdReplies();
    await h.agent.start();
    await waitFor(() => h.agent.lease.held, 30_000, 'the first generation');
    // Another process (a reaper, a second daemon) moved the generation on.
    h.api.lease.generation = 7;
    clock.advance(INTERVAL);
    await waitFor(() => h.agent.lease.generation === 8, 20_000, 'the fresh generation');
    // The stale renewal (generation 1) was fenced and followed at once by an acquire.
    expect(h.api.of('renewLease').map((call) => call.input.generation ?? null)).toEqual([null, 1, null]);
    clock.advance(INTERVAL);
    await waitFor(() => h.api.of('renewLease').length === 4, 20_000, 'the next renewal');
    expect(h.api.of('renewLease')[3]!.input.generation).toBe(8);
    releaseModel();
    await waitFor(() => h.api.of('releaseLease').length > 0, 30_000, 'the release');
    expect(h.api.of('releaseLease')[0]!.input.generation).toBe(8);
  });
});
