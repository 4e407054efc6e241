// An injectable clock for rules that depend on time passing (token expiry): real time plus an
// offset the test moves, so a test jumps past an expiry instead of waiting for it. Frozen, it
// stands still however slow the machine is, so "just before" and "just after" are exact.

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
