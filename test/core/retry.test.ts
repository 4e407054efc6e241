// The one backoff and retry loop the server and the daemon share (contract/retry.ts): capped
// exponential delays, jitter inside its bounds, and retry() waiting on the clock it is given.
import { describe, expect, test } from 'vitest';
import { Backoff, cappedExponentialMs, retry } from '../../contract/retry';
import { createFakeClock } from '../support/clock';
import { waitFor } from '../support/wait';

describe('backoff', () => {
  test('doubles from the first delay up to the cap', () => {
    const backoff = new Backoff({ initialMs: 100, maxMs: 1_000, jitter: 0 });
    expect(Array.from({ length: 6 }, () => backoff.next())).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    expect(backoff.attempts).toBe(6);
    backoff.reset();
    expect(backoff.next()).toBe(100);
    expect(cappedExponentialMs(3, { initialMs: 10, factor: 3, maxMs: 1_000 })).toBe(270);
  });

  test('jitter stays within its bounds on either side or only below', () => {
    const draw = (random: number, jitterSide: 'both' | 'below') =>
      new Backoff({ initialMs: 1_000, jitter: 0.5, jitterSide, random: () => random }).next();
    expect([draw(0, 'both'), draw(0.5, 'both'), draw(0.999_999, 'both')]).toEqual([500, 1_000, 1_500]);
    expect([draw(0, 'below'), draw(0.5, 'below'), draw(0.999_999, 'below')]).toEqual([500, 750, 1_000]);
  });
});

describe('retry', () => {
  test('waits each backoff delay on the clock between attempts and returns the first success', async () => {
    const clock = createFakeClock();
    const attempts: number[] = [];
    const retries: number[] = [];
    const result = retry(
      async (attempt) => {
        attempts.push(clock.now());
        if (attempt < 3) throw new Error(`failure ${attempt}`);
        return 'done';
      },
      {
        maxAttempts: 5,
        backoff: { initialMs: 100, jitter: 0 },
        clock,
        onRetry: ({ delayMs }) => retries.push(delayMs),
      },
    );
    await waitFor(() => attempts.length === 1, 5_000, 'the first attempt');
    clock.advance(99);
    await new Promise((resolve) => setImmediate(resolve));
    expect(attempts).toHaveLength(1);
    clock.advance(1);
    await waitFor(() => attempts.length === 2, 5_000, 'the second attempt');
    clock.advance(200);
    await expect(result).resolves.toBe('done');
    expect(attempts.map((at) => at - attempts[0]!)).toEqual([0, 100, 300]);
    expect(retries).toEqual([100, 200]);
  });

  test('a failure that is not retryable is thrown at once; the last one when attempts run out', async () => {
    let calls = 0;
    const fatal = new Error('fatal');
    await expect(
      retry(
        async () => {
          calls += 1;
          throw fatal;
        },
        { maxAttempts: 5, retryable: (error) => error !== fatal, sleep: async () => {} },
      ),
    ).rejects.toBe(fatal);
    expect(calls).toBe(1);

    const waits: number[] = [];
    await expect(
      retry(
        async (attempt) => {
          throw new Error(`attempt ${attempt}`);
        },
        {
          maxAttempts: 3,
          backoff: { initialMs: 10, jitter: 0 },
          sleep: async (ms) => void waits.push(ms),
          exhausted: (error) => new Error('gave up', { cause: error }),
        },
      ),
    ).rejects.toMatchObject({ message: 'gave up', cause: { message: 'attempt 3' } });
    expect(waits).toEqual([10, 20]);
  });

  test('delayFor replaces a delay (a Retry-After) and may give up instead', async () => {
    const waits: number[] = [];
    const tooLong = new Error('retry after an hour');
    await expect(
      retry(
        async (attempt) => {
          throw attempt === 1 ? new Error('retry after 5 s') : tooLong;
        },
        {
          maxAttempts: 5,
          backoff: { initialMs: 10, jitter: 0 },
          sleep: async (ms) => void waits.push(ms),
          delayFor: (error, backoffMs) => {
            if (error === tooLong) throw error;
            return backoffMs + 4_990;
          },
        },
      ),
    ).rejects.toBe(tooLong);
    expect(waits).toEqual([5_000]);
  });
});
