// Keyed batching for work whose cost is per round trip, not per item (the account's admission
// transaction, one git invocation against a repository). Per key, one batch runs at a time; items
// that arrive meanwhile wait and form the next batch, so under no contention an item starts at once
// and under a burst N items cost about N / (items per batch) round trips. Every item of a batch
// arrived before the batch started, so a batch never answers with state older than its items.

/** One item's outcome: its value, or the error only that item fails with. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

export interface KeyedBatcherOptions {
  /** Most items in one batch; the rest wait for the next. */
  maxBatch: number;
}

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/**
 * `run(key, items)` handles one batch and returns one outcome per item, in order; if it throws,
 * every item of the batch fails with that error.
 */
export function createKeyedBatcher<I, O>(
  run: (key: string, items: I[]) => Promise<Array<Settled<O>>>,
  options: KeyedBatcherOptions,
): (key: string, item: I) => Promise<O> {
  const waiting = new Map<string, Array<Waiting<I, O>>>();
  const running = new Set<string>();

  async function drain(key: string): Promise<void> {
    for (;;) {
      const queue = waiting.get(key);
      if (!queue || queue.length === 0) {
        waiting.delete(key);
        running.delete(key);
        return;
      }
      const batch = queue.splice(0, options.maxBatch);
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
    }
  }

  return (key, item) =>
    new Promise<O>((resolve, reject) => {
      const queue = waiting.get(key) ?? [];
      queue.push({ item, resolve, reject });
      waiting.set(key, queue);
      if (running.has(key)) return;
      running.add(key);
      // Starts after the current tick, so calls made together share the first batch as well.
      queueMicrotask(() => void drain(key));
    });
}
