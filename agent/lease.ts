// R-LEASE-1: while a turn is busy or retrying, hold the execution lease — acquire at once, renew
// every `renewIntervalMs` keeping the fencing generation — and release it when the turn ends.
import { randomUUID } from 'node:crypto';
import { type Clock, type ClockTimer, systemClock } from '../contract/clock';
import { ApiPayloadError, type ApiClient, type LeaseInfo } from './api-client';
import type { Logger } from './logger';

export interface LeaseKeeperOptions {
  api: ApiClient;
  logger: Logger;
  sessionId: string;
  /** @default 60_000 */
  renewIntervalMs: number;
  /** Every timer and reading of time goes through it. @default systemClock */
  clock?: Clock;
}

export class LeaseKeeper {
  /** Fencing generation of the lease we hold, or null when none is held. */
  generation: number | null = null;
  lastLease: LeaseInfo | null = null;
  renewals = 0;
  /**
   * Key of the acquire in progress, kept across its retries (here and inside the API client) until
   * a generation is held: an attempt the server applied but whose answer was lost is then answered
   * again with the same generation rather than moving it on. A new acquire takes a new key.
   */
  private acquisition: string | null = null;
  private timer: ClockTimer | null = null;
  private wanted = false;
  /** A renewal waits in the chain: a tick while one waits adds none (see scheduleRenew). */
  private renewQueued = false;
  /** When the last renewal went out (the clock's monotonic reading). */
  private lastSentAt = Number.NEGATIVE_INFINITY;
  // Serialises acquire/renew/release so a release never races an in-flight renewal.
  private chain: Promise<void> = Promise.resolve();
  private readonly log: Logger;
  private readonly clock: Clock;

  constructor(private readonly options: LeaseKeeperOptions) {
    this.log = options.logger.child({ module: 'lease' });
    this.clock = options.clock ?? systemClock;
  }

  get held(): boolean {
    return this.generation !== null;
  }

  /** A turn is in flight: renew now and on every interval until `release()`. */
  hold(): void {
    if (this.wanted) return;
    this.wanted = true;
    this.scheduleRenew();
    this.timer = this.clock.setInterval(() => {
      // A renewal held up behind a slow one went out late; the tick right after it would renew
      // again within moments, so it waits for the next. Renewals are then at least three quarters
      // of an interval apart and at most one and three quarters: well inside the lease's lifetime
      // (three intervals by default).
      if (this.clock.monotonic() - this.lastSentAt < (this.options.renewIntervalMs * 3) / 4) return;
      this.scheduleRenew();
    }, this.options.renewIntervalMs);
  }

  /** The turn ended: stop renewing and release the lease. */
  release(): Promise<void> {
    this.wanted = false;
    this.timer?.cancel();
    this.timer = null;
    return this.enqueue(() => this.releaseNow());
  }

  /**
   * Queues one renewal unless one is already waiting. Against a server that is behind, a renewal
   * can take longer than the interval (it retries for up to a minute); ticks meanwhile must not
   * stack up renewals that would all run, stale, once it answers again.
   */
  private scheduleRenew(): void {
    if (this.renewQueued) return;
    this.renewQueued = true;
    this.enqueue(() => {
      this.renewQueued = false;
      return this.renew();
    });
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(task, task);
    return this.chain;
  }

  private async renew(): Promise<void> {
    if (!this.wanted) return;
    const generation = this.generation ?? undefined;
    const { sessionId } = this.options;
    if (generation === undefined) this.acquisition ??= randomUUID();
    this.lastSentAt = this.clock.monotonic();
    try {
      const lease = await this.options.api.renewLease(
        generation === undefined ? { sessionId, acquisition: this.acquisition! } : { sessionId, generation },
      );
      this.generation = lease.generation;
      this.acquisition = null;
      this.lastLease = lease;
      this.renewals += 1;
      this.log.debug({ generation: lease.generation, expiresAt: lease.expiresAt }, 'lease renewed');
    } catch (error) {
      if (error instanceof ApiPayloadError && error.code === 'LEASE_FENCED') {
        // Someone moved the generation on (a reaper or a restarted daemon): acquire afresh now.
        this.log.warn({ generation }, 'lease fenced; acquiring a new generation');
        this.generation = null;
        if (generation !== undefined) await this.renew();
        return;
      }
      this.log.warn({ err: (error as Error).message }, 'lease renewal failed; retrying on the next tick');
    }
  }

  private async releaseNow(): Promise<void> {
    const generation = this.generation;
    if (generation === null) return;
    try {
      const lease = await this.options.api.releaseLease({ sessionId: this.options.sessionId, generation });
      this.lastLease = lease;
      this.log.debug({ generation }, 'lease released');
    } catch (error) {
      // A lease we fail to release simply expires (R-LEASE-3).
      this.log.warn({ err: (error as Error).message, generation }, 'lease release failed');
    } finally {
      if (!this.wanted) this.generation = null;
    }
  }

  async stop(): Promise<void> {
    await this.release();
  }
}
