// Capped exponential backoff with jitter, and one retry loop over it: the daemon (API calls,
// OpenCode restarts, event-stream reconnects) and the server (provider calls, start-up steps) use
// these rather than loops of their own.
import { type Clock, sleep, systemClock } from './clock';

export interface BackoffOptions {
  /** First delay. @default 250 */
  initialMs?: number;
  /** Cap of the delay before jitter. @default 30_000 */
  maxMs?: number;
  /** Growth per attempt. @default 2 */
  factor?: number;
  /** Fraction of the delay randomised (0 = deterministic). @default 0.2 */
  jitter?: number;
  /**
   * Where the jitter falls: `both` draws from [d·(1−jitter), d·(1+jitter)]; `below` from
   * [d·(1−jitter), d], so the cap is never exceeded. @default 'both'
   */
  jitterSide?: 'both' | 'below';
  /** @default Math.random */
  random?: () => number;
}

/** The delay before retry number `retry` (0 for the first retry), capped, before jitter. */
export function cappedExponentialMs(retry: number, options: BackoffOptions = {}): number {
  const initialMs = options.initialMs ?? 250;
  const maxMs = options.maxMs ?? 30_000;
  const factor = options.factor ?? 2;
  return Math.min(maxMs, initialMs * factor ** retry);
}

/** Successive delays: each call to `next()` is one attempt further, until `reset()`. */
export class Backoff {
  private attempt = 0;
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  readonly jitter: number;
  private readonly options: BackoffOptions;

  constructor(options: BackoffOptions = {}) {
    this.options = options;
    this.initialMs = options.initialMs ?? 250;
    this.maxMs = options.maxMs ?? 30_000;
    this.factor = options.factor ?? 2;
    this.jitter = options.jitter ?? 0.2;
  }

  /** The next delay; grows by `factor` per call up to `maxMs`, then jittered. */
  next(): number {
    const base = cappedExponentialMs(this.attempt, this.options);
    this.attempt += 1;
    const random = (this.options.random ?? Math.random)();
    const spread = base * this.jitter;
    const low = base - spread;
    const width = this.options.jitterSide === 'below' ? spread : 2 * spread;
    return Math.max(0, Math.round(low + random * width));
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}

export interface RetryOptions<E = unknown> {
  /** Attempts in total, the first included. */
  maxAttempts: number;
  backoff?: BackoffOptions;
  /** Whether a failure is worth another attempt; others are thrown at once. @default every one */
  retryable?: (error: E, attempt: number) => boolean;
  /** Overrides the backoff's delay for one failure (e.g. a Retry-After); may throw to give up. */
  delayFor?: (error: E, backoffMs: number, attempt: number) => number;
  /** Called before each wait; for logs and tests. */
  onRetry?: (info: { attempt: number; delayMs: number; error: E }) => void;
  /** What the last failure becomes when attempts run out. @default the failure itself */
  exhausted?: (error: E, attempt: number) => unknown;
  /** Stops the waiting early; the loop then throws the last failure. */
  signal?: AbortSignal;
  /** Waits run on it. @default systemClock */
  clock?: Clock;
  /** Replaces the wait (tests). @default sleep on `clock` */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Runs `fn` until it succeeds, a failure is not retryable, or `maxAttempts` ran out, waiting the
 * backoff's delay between attempts. `fn` receives the attempt number (from 1).
 */
export async function retry<T, E = unknown>(
  fn: (attempt: number) => Promise<T>,
  options: RetryOptions<E>,
): Promise<T> {
  const backoff = new Backoff(options.backoff);
  const wait = options.sleep ?? ((ms: number) => sleep(ms, options.signal, options.clock ?? systemClock));
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (raw) {
      const error = raw as E;
      const retryable = options.retryable?.(error, attempt) ?? true;
      if (!retryable) throw error;
      if (attempt >= options.maxAttempts || options.signal?.aborted)
        throw options.exhausted ? options.exhausted(error, attempt) : error;
      const backoffMs = backoff.next();
      const delayMs = options.delayFor ? options.delayFor(error, backoffMs, attempt) : backoffMs;
      options.onRetry?.({ attempt, delayMs, error });
      await wait(delayMs);
    }
  }
}
