// An injectable clock for rules that depend on time passing (token expiry): real time plus an
// offset the test moves, so a test jumps past an expiry instead of waiting for it. Frozen, it
// stands still however slow the machine is, so "just before" and "just after" are exact.

import type { Clock, ClockTimer } from '../../contract/clock';

export interface TestClock {
  /** Milliseconds since the epoch: real time plus every advance so far. Pass it as `now`. */
  now: () => number;
  /** Moves the clock forward by `ms` for everything that reads `now`. */
  advance(ms: number): void;
  /** Stops the clock where it is; only advance() moves it until resume(). */
  freeze(): void;
  /** Lets the clock run with real time again, from where it stands (it never goes back). */
  resume(): void;
}

export function createTestClock(): TestClock {
  let offsetMs = 0;
  let frozenAt: number | null = null;
  const now = () => frozenAt ?? Date.now() + offsetMs;
  return {
    now,
    advance(ms) {
      if (ms < 0) throw new Error(`a test clock only moves forward (asked for ${ms} ms)`);
      if (frozenAt === null) offsetMs += ms;
      else frozenAt += ms;
    },
    freeze() {
      frozenAt = now();
    },
    resume() {
      if (frozenAt === null) return;
      offsetMs = frozenAt - Date.now();
      frozenAt = null;
    },
  };
}

/**
 * A `Clock` (contract/clock.ts) whose time moves only when the test calls `advance`: every timer
 * due by then fires, in order, at its own time. Pass it as a component's `clock` option so an
 * interval or a backoff passes at once; "not yet" is exact (a timer due 1 ms later never fired).
 */
export interface FakeClock extends Clock {
  /** Moves time on by `ms`, firing every timer that falls due on the way (intervals repeatedly). */
  advance(ms: number): void;
  /** Timers still scheduled: when each falls due and, for an interval, its period. */
  pending(): Array<{ dueAt: number; intervalMs: number | null }>;
}

export function createFakeClock(startAt = Date.now()): FakeClock {
  interface Entry {
    id: number;
    dueAt: number;
    intervalMs: number | null;
    fn: () => void;
  }
  let time = startAt;
  let nextId = 0;
  const timers = new Map<number, Entry>();
  const schedule = (fn: () => void, ms: number, interval: boolean): ClockTimer => {
    const entry: Entry = {
      id: nextId++,
      dueAt: time + Math.max(0, ms),
      intervalMs: interval ? Math.max(1, ms) : null,
      fn,
    };
    timers.set(entry.id, entry);
    return {
      cancel: () => void timers.delete(entry.id),
      unref() {
        return this;
      },
    };
  };
  return {
    now: () => time,
    monotonic: () => time - startAt,
    setTimeout: (fn, ms) => schedule(fn, ms, false),
    setInterval: (fn, ms) => schedule(fn, ms, true),
    advance(ms) {
      if (ms < 0) throw new Error(`a fake clock only moves forward (asked for ${ms} ms)`);
      const until = time + ms;
      for (;;) {
        let due: Entry | undefined;
        for (const entry of timers.values())
          if (entry.dueAt <= until && (!due || entry.dueAt < due.dueAt)) due = entry;
        if (!due) break;
        time = due.dueAt;
        if (due.intervalMs === null) timers.delete(due.id);
        else due.dueAt += due.intervalMs;
        due.fn();
      }
      time = until;
    },
    pending: () => [...timers.values()].map(({ dueAt, intervalMs }) => ({ dueAt, intervalMs })),
  };
}
