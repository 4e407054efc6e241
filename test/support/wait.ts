// The test kit's one way to wait: poll a condition until it holds, never sleep for a guessed time.

/**
 * Every timeout is a backstop, multiplied by this (`TEST_WAIT_SCALE`, default 3): on a loaded
 * 2-core machine each step of a real server or `opencode serve` takes several times longer than
 * on an idle one, and a longer backstop only delays a failure, never hides one.
 */
export const WAIT_SCALE = Number(process.env.TEST_WAIT_SCALE ?? 3) || 3;

/** How `waitFor` polls. */
export interface WaitForOptions {
  /** Before WAIT_SCALE. @default 20_000 */
  timeoutMs?: number;
  /** Pause between two checks. @default 50 */
  intervalMs?: number;
  /** What is awaited, for the timeout message. @default 'condition' */
  what?: string;
}

/** The values `waitFor` treats as "not yet". */
type NotYet = null | undefined | false | 0 | '';

/**
 * Calls `check` until it returns a truthy value and resolves to that value. A check that throws
 * counts as "not yet" (a server still starting, a row not yet written); after the timeout it fails
 * with what was awaited, the last value and the last error.
 *
 * `waitFor(check, 10_000, 'the release')` and `waitFor(check, { timeoutMs: 10_000, what: 'the release' })`
 * are the same.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  timeoutOrOptions: number | WaitForOptions = {},
  what?: string,
): Promise<Exclude<T, NotYet>> {
  const options = typeof timeoutOrOptions === 'number' ? { timeoutMs: timeoutOrOptions } : timeoutOrOptions;
  const timeoutMs = Math.round((options.timeoutMs ?? 20_000) * WAIT_SCALE);
  const intervalMs = options.intervalMs ?? 50;
  const label = what ?? options.what ?? 'condition';
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  let lastError: unknown;
  for (;;) {
    try {
      last = await check();
      if (last) return last as Exclude<T, NotYet>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${label} (last value: ${describe(last)}` +
      `${lastError === undefined ? '' : `, last error: ${String(lastError)}`})`,
  );
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Resolves once a pub/sub stream has taken its starting point. A live-only stream starts after the
 * seq it reads from the log (EventStream.start in server/pubsub.ts), so an event published before
 * that read completes may count as earlier and is not delivered to it.
 */
export async function streamStarted(stream: AsyncIterator<unknown>): Promise<void> {
  await waitFor(() => !(stream as unknown as { busy: boolean }).busy, {
    intervalMs: 5,
    what: 'the stream to take its starting point',
  });
}

/** A promise and the function that settles it, for a test that releases a step itself. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/**
 * Lets `n` turns of the event loop pass (I/O callbacks, timers due, microtasks): work that could
 * start without waiting for something has started. For asserting that something is still waiting.
 */
export async function eventLoopTurns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}
