// The clock time-driven code reads: the wall time, a monotonic reading and timers. Production
// passes `systemClock`; tests pass a fake one (test/support/clock.ts) and move it on by hand, so a
// renew interval or a restart backoff passes at once instead of in real seconds.

/** A scheduled callback; `cancel` stops it, `unref` lets the process exit while it waits. */
export interface ClockTimer {
  cancel(): void;
  unref(): this;
}

export interface Clock {
  /** Milliseconds since the epoch (Date.now()). */
  now(): number;
  /** A monotonic reading in milliseconds (performance.now()): only differences mean anything. */
  monotonic(): number;
  /** Runs `fn` once after `ms`. */
  setTimeout(fn: () => void, ms: number): ClockTimer;
  /** Runs `fn` every `ms` until cancelled. */
  setInterval(fn: () => void, ms: number): ClockTimer;
}

function wrap(handle: NodeJS.Timeout, clear: (handle: NodeJS.Timeout) => void): ClockTimer {
  return {
    cancel: () => clear(handle),
    unref() {
      handle.unref();
      return this;
    },
  };
}

/** Real time: Date.now, performance.now and Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => wrap(setTimeout(fn, ms), clearTimeout),
  setInterval: (fn, ms) => wrap(setInterval(fn, ms), clearInterval),
};

/** Resolves after `ms` on `clock`, or early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = systemClock): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = clock.setTimeout(done, ms);
    function done(): void {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
