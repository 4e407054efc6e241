// Keyed batching for work whose cost is per round trip, not per item (the account's admission
// transaction, one git invocation against a repository). Per key, one batch runs at a time; items
// that arrive meanwhile wait and form the next batch, so under no contention an item starts at once
// and under a burst N items cost about N / (items per batch) round trips. Every item of a batch
// arrived before the batch started, so a batch never answers with state older than its items.
//
// A caller that knows an item is on its way (a session create that will cut a branch once it is
// admitted) can announce it with `expect(key)`. A batch about to start waits for announced items,
// as PostgreSQL's commit_delay waits for sibling transactions: only while some are announced, and
// at most `lingerMs` and never longer than the key's previous batch ran. Without that, creates that
// left an earlier stage one at a time keep alternating between a batch of one and a batch of the
// rest, each paying the whole round trip.

/** One item's outcome: its value, or the error only that item fails with. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

export interface KeyedBatcherOptions {
  /** Most items in one batch; the rest wait for the next. */
  maxBatch: number;
  /**
   * Longest a batch waits for announced items before it starts (0, the default: never waits).
   * Once a batch of the key has run, the wait is also bounded by how long that batch ran: a batch
   * that started without them would keep them waiting about that long anyway.
   */
  lingerMs?: number;
}

/** Says that an announced item will not come after all; once it has been sent, it does nothing. */
export type BatchTicket = () => void;

export interface KeyedBatcher<I, O> {
  /** Sends `item`; a `ticket` from `expect` is used up by this call. */
  (key: string, item: I, ticket?: BatchTicket): Promise<O>;
  /** Announces an item for `key`: batches wait for it (see lingerMs) until it is sent or dropped. */
  expect(key: string): BatchTicket;
}

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/** Most keys whose last batch duration is remembered; past it they are forgotten together. */
const REMEMBERED_KEYS_MAX = 1_000;

/**
 * `run(key, items)` handles one batch and returns one outcome per item, in order; if it throws,
 * every item of the batch fails with that error.
 */
export function createKeyedBatcher<I, O>(
  run: (key: string, items: I[]) => Promise<Array<Settled<O>>>,
  options: KeyedBatcherOptions,
): KeyedBatcher<I, O> {
  const waiting = new Map<string, Array<Waiting<I, O>>>();
  const running = new Set<string>();
  const announced = new Map<string, number>();
  const lastRunMs = new Map<string, number>();
  const wakers = new Map<string, () => void>();

  function wake(key: string): void {
    const waker = wakers.get(key);
    wakers.delete(key);
    waker?.();
  }

  /** Waits while items of `key` are announced and the batch is not full, within the bound. */
  async function linger(key: string, queue: ReadonlyArray<Waiting<I, O>>): Promise<void> {
    const bound = Math.min(options.lingerMs ?? 0, lastRunMs.get(key) ?? Number.POSITIVE_INFINITY);
    const until = performance.now() + bound;
    while ((announced.get(key) ?? 0) > 0 && queue.length < options.maxBatch) {
      const left = until - performance.now();
      if (left <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wakers.delete(key);
          resolve();
        }, left);
        wakers.set(key, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async function drain(key: string): Promise<void> {
    for (;;) {
      const queue = waiting.get(key);
      if (!queue || queue.length === 0) {
        waiting.delete(key);
        running.delete(key);
        return;
      }
      await linger(key, queue);
      const batch = queue.splice(0, options.maxBatch);
      const started = performance.now();
      try {
        const outcomes = await run(
          key,
          batch.map((w) => w.item),
        );
        batch.forEach((w, index) => {
          const outcome = outcomes[index];
          if (!outcome) w.reject(new Error('batch returned no outcome for an item'));
          else if (outcome.ok) w.resolve(outcome.value);
          else w.reject(outcome.error);
        });
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
      if (lastRunMs.size >= REMEMBERED_KEYS_MAX && !lastRunMs.has(key)) lastRunMs.clear();
      lastRunMs.set(key, performance.now() - started);
    }
  }

  function send(key: string, item: I, ticket?: BatchTicket): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const queue = waiting.get(key) ?? [];
      queue.push({ item, resolve, reject });
      waiting.set(key, queue);
      ticket?.();
      wake(key);
      if (running.has(key)) return;
      running.add(key);
      // Starts after the current tick, so calls made together share the first batch as well.
      queueMicrotask(() => void drain(key));
    });
  }

  function expect(key: string): BatchTicket {
    announced.set(key, (announced.get(key) ?? 0) + 1);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      const left = (announced.get(key) ?? 1) - 1;
      if (left > 0) announced.set(key, left);
      else announced.delete(key);
      wake(key);
    };
  }

  return Object.assign(send, { expect });
}
