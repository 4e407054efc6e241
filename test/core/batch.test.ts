// createKeyedBatcher: one batch per key at a time, later arrivals form the next batch, each item
// gets its own outcome.
import { describe, expect, test } from 'vitest';
import { createKeyedBatcher, type Settled } from '../../resolvers/batch';
import { deferred, eventLoopTurns } from '../support/wait';

describe('createKeyedBatcher', () => {
  test('calls made together share a batch; calls made while it runs form the next one', async () => {
    const batches: Array<{ key: string; items: number[] }> = [];
    const gate = deferred();
    const call = createKeyedBatcher<number, number>(
      async (key, items) => {
        batches.push({ key, items });
        if (batches.length === 1) await gate.promise;
        return items.map((n) => ({ ok: true, value: n * 10 }));
      },
      { maxBatch: 3 },
    );
    const first = [call('a', 1), call('a', 2)];
    await Promise.resolve();
    await Promise.resolve();
    expect(batches).toEqual([{ key: 'a', items: [1, 2] }]);
    // While the first batch runs: four more for "a" (more than maxBatch) and one for another key.
    const later = [call('a', 3), call('a', 4), call('a', 5), call('a', 6)];
    const other = call('b', 7);
    expect(await other).toBe(70);
    gate.resolve();
    expect(await Promise.all([...first, ...later])).toEqual([10, 20, 30, 40, 50, 60]);
    expect(batches).toEqual([
      { key: 'a', items: [1, 2] },
      { key: 'b', items: [7] },
      { key: 'a', items: [3, 4, 5] },
      { key: 'a', items: [6] },
    ]);
  });

  test('each item gets its own outcome, and a failed batch fails only its own items', async () => {
    let runs = 0;
    const call = createKeyedBatcher<number, number>(
      async (_key, items) => {
        runs += 1;
        if (items.includes(0)) throw new Error('batch failed');
        return items.map(
          (n): Settled<number> => (n % 2 === 0 ? { ok: true, value: n } : { ok: false, error: n }),
        );
      },
      { maxBatch: 10 },
    );
    const results = await Promise.allSettled([call('k', 1), call('k', 2)]);
    expect(results).toEqual([
      { status: 'rejected', reason: 1 },
      { status: 'fulfilled', value: 2 },
    ]);
    await expect(call('k', 0)).rejects.toThrow('batch failed');
    // The key is free again: the next call runs at once in a batch of its own.
    expect(await call('k', 4)).toBe(4);
    expect(runs).toBe(3);
  });
});

describe('createKeyedBatcher: announced items', () => {
  function recording(options: { lingerMs: number }) {
    const batches: number[][] = [];
    const call = createKeyedBatcher<number, number>(
      async (_key, items) => {
        batches.push(items);
        return items.map((n) => ({ ok: true, value: n }));
      },
      { maxBatch: 10, ...options },
    );
    return { call, batches };
  }

  test('a batch waits for an announced item and takes it along', async () => {
    const { call, batches } = recording({ lingerMs: 60_000 });
    const ticket = call.expect('k');
    const first = call('k', 1);
    await eventLoopTurns();
    expect(batches).toEqual([]);
    const second = call('k', 2, ticket);
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(batches).toEqual([[1, 2]]);
  });

  test('a ticket dropped unused lets the waiting batch go at once; other keys never wait', async () => {
    const { call, batches } = recording({ lingerMs: 60_000 });
    const ticket = call.expect('k');
    const first = call('k', 1);
    expect(await call('other', 9)).toBe(9);
    await eventLoopTurns();
    expect(batches).toEqual([[9]]);
    ticket();
    ticket(); // a second call does nothing
    expect(await first).toBe(1);
    // No item is announced any more: the next one starts at once.
    expect(await call('k', 2)).toBe(2);
    expect(batches).toEqual([[9], [1], [2]]);
  });

  test('the wait is bounded by lingerMs, and by how long the key’s last batch ran', async () => {
    const bounded = recording({ lingerMs: 1 });
    const open = bounded.call.expect('k');
    expect(await bounded.call('k', 1)).toBe(1);
    open();

    // The first batch of "k" ran in no time, so with a ticket left open the next one hardly waits
    // although lingerMs would allow a minute.
    const { call, batches } = recording({ lingerMs: 60_000 });
    const early = call.expect('k');
    const first = call('k', 1);
    await eventLoopTurns();
    early();
    await first;
    const late = call.expect('k');
    expect(await call('k', 2)).toBe(2);
    expect(batches).toEqual([[1], [2]]);
    late();
  });

  test('a batch that fills up while it waits starts without the announced item', async () => {
    const batches: number[][] = [];
    const call = createKeyedBatcher<number, number>(
      async (_key, items) => {
        batches.push(items);
        return items.map((n) => ({ ok: true, value: n }));
      },
      { maxBatch: 2, lingerMs: 60_000 },
    );
    const ticket = call.expect('k');
    const first = call('k', 1);
    await eventLoopTurns();
    expect(batches).toEqual([]);
    expect(await Promise.all([first, call('k', 2)])).toEqual([1, 2]);
    expect(batches).toEqual([[1, 2]]);
    const third = call('k', 3, ticket);
    expect(await third).toBe(3);
    expect(batches).toEqual([[1, 2], [3]]);
  });
});
