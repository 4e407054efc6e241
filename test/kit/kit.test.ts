// The test kit's own contracts: what other tests rely on when they wait, read a repository in
// memory or move a clock.
import { describe, expect, test } from 'vitest';
import { createGitTreeReader } from '../../image/repo-files';
import { createTestClock } from '../support/clock';
import { createTestRepo } from '../support/git';
import { createMemoryRepo } from '../support/repo-files';
import { WAIT_SCALE, waitFor } from '../support/wait';

describe('waitFor', () => {
  test('resolves to the first truthy value and retries checks that throw', async () => {
    let calls = 0;
    const value = await waitFor(() => {
      calls += 1;
      if (calls === 1) throw new Error('not up yet');
      return calls >= 3 ? { calls } : null;
    });
    expect(value).toEqual({ calls: 3 });
  });

  test('fails after the timeout naming what it awaited, the last value and the last error', async () => {
    let calls = 0;
    const failure = await waitFor(
      () => {
        calls += 1;
        if (calls % 2 === 0) throw new Error('flaky backend');
        return 0;
      },
      { timeoutMs: 200, intervalMs: 10, what: 'the backend' },
    ).catch((error: Error) => error.message);
    expect(failure).toBe(
      `timed out after ${200 * WAIT_SCALE} ms waiting for the backend (last value: 0, last error: Error: flaky backend)`,
    );
  });
});

describe('the in-memory repository', () => {
  test('lists and reads what the git reader lists and reads for the same commits', async () => {
    const files = {
      Dockerfile: 'FROM x\nCOPY . /app\n',
      'src/a.ts': 'a',
      'src/b/c.json': '{}',
      'bin/run.sh': '#!/bin/sh\n',
      'z.bin': Buffer.from([0, 1, 2, 255]),
    };
    const git = createTestRepo(null, { upstream: false });
    const memory = createMemoryRepo();
    try {
      const commits = [
        [
          git.commit(files, { executable: ['bin/run.sh'] }),
          memory.commit(files, { executable: ['bin/run.sh'] }),
        ],
        [
          git.commit({ 'src/a.ts': null, 'new.txt': 'n' }),
          memory.commit({ 'src/a.ts': null, 'new.txt': 'n' }),
        ],
      ] as const;
      for (const [gitCommit, memoryCommit] of commits) {
        const real = createGitTreeReader(git.dir, gitCommit);
        const fake = memory.reader(memoryCommit);
        try {
          expect(await fake.listEntries()).toEqual(await real.listEntries());
          expect(await fake.listFiles()).toEqual(await real.listFiles());
          for (const path of [...(await real.listFiles()), 'missing.txt']) {
            expect(await fake.readFile(path)).toEqual(await real.readFile(path));
          }
        } finally {
          real.close();
        }
      }
    } finally {
      git.remove();
    }
  });
});

describe('the test clock', () => {
  test('follows real time plus what the test advanced, and stands still while frozen', () => {
    const clock = createTestClock();
    clock.advance(60_000);
    // Real time read first: read after the clock, a millisecond tick in between made it 59,999.
    const realBefore = Date.now();
    expect(clock.now() - realBefore).toBeGreaterThanOrEqual(60_000);
    clock.freeze();
    const frozen = clock.now();
    clock.advance(1_500);
    expect(clock.now()).toBe(frozen + 1_500);
    clock.resume();
    expect(clock.now()).toBeGreaterThanOrEqual(frozen + 1_500);
    expect(() => clock.advance(-1)).toThrow(/only moves forward/);
  });
});
