/** Capped exponential backoff with jitter, shared by every reconnect/retry loop in the daemon. */
export interface BackoffOptions {
  /** @default 250 */
  initialMs?: number;
  /** @default 30_000 */
  maxMs?: number;
  /** @default 2 */
  factor?: number;
  /** Fraction of the delay randomised (0 = deterministic). @default 0.2 */
  jitter?: number;
}

export class Backoff {
  private attempt = 0;
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  readonly jitter: number;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 250;
    this.maxMs = options.maxMs ?? 30_000;
    this.factor = options.factor ?? 2;
    this.jitter = options.jitter ?? 0.2;
  }

  /** The next delay; grows by `factor` per call up to `maxMs`. */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * this.factor ** this.attempt);
    this.attempt += 1;
    const spread = base * this.jitter;
    return Math.max(0, Math.round(base - spread + Math.random() * 2 * spread));
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}

export { sleep } from '../contract/clock';
