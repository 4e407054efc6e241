// The order test files start in. With four workers the run lasts at least as long as its longest
// file, so the long ones must start first. Vitest orders by the durations it cached from earlier
// runs; a clean clone has none and vitest would fall back to file size, which puts the minutes-long
// end-to-end files (few lines, real OpenCode, real idle timeouts) near the end. Without a complete
// cache, files matching LONG_FIRST start first, in that order, then the rest by size.
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Path prefixes (from the repository root) of the files that take longest, longest first, as
 * measured on a clean clone (seconds in a solo run, 2 cores). The machine is CPU-bound for most of a
 * run, so the order matters at the end: a long file started last runs alone.
 */
const LONG_FIRST = [
  'test/e2e/daemon-lease.', // 160
  'test/web/dashboard', // 75
  'test/agent/reload', // 57
  'test/leases/leases', // 39
  'test/e2e/reload', // 38
  'test/cli/reload', // 36
  'test/agent/supervisor', // 28
  'test/e2e/npm-start.', // 28
  'test/snapshots/snapshots', // 22
  'test/agent/lease', // 22
  'test/providers/daytona', // 20
  'test/agent/proxy', // 16
  'test/agent/offload', // 16
  'test/providers-e2e/lifecycle', // 16
  'test/git/change-requests', // 14
  'test/git/proxy', // 13
  'test/e2e/session-access', // 13
  'test/triggers/', // 12
  'test/core/migrations', // 12
  'test/realtime/fleet', // 12
  'test/agent/memory-guard', // 11
  'test/git/git-service', // 10
  'test/core/server', // 10
  'test/e2e/', // the rest of the end-to-end files
  'test/providers-e2e/',
];

export default class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const path = (file: TestSpecification) => relative(root, file.moduleId);
    const cached = files.every((file) =>
      this.ctx.cache.getFileTestResults(`${file.project.name}:${path(file)}`),
    );
    const bySize = await super.sort(files);
    if (cached) return bySize;
    const rank = (file: TestSpecification) => {
      const index = LONG_FIRST.findIndex((prefix) => path(file).startsWith(prefix));
      return index === -1 ? LONG_FIRST.length : index;
    };
    // Array.prototype.sort is stable: within a rank, vitest's order stays.
    return bySize.sort((a, b) => rank(a) - rank(b));
  }
}
