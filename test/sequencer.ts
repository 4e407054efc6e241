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
  'test/deploy/topology', // 105
  'test/deploy/compose', // 75 with both images built, 150 when it builds the services image
  'test/deploy/image', // 60 when it builds the image, 35 when cached
  'test/web/dashboard', // 97
  'test/agent/reload', // 69
  'test/leases/leases', // 63
  'test/e2e/reload', // 49
  'test/e2e/daemon-lease.', // 37 each
  'test/cli/reload', // 35
  'test/agent/supervisor', // 31
  'test/agent/lease', // 28
  'test/git/git-service', // 26
  'test/e2e/npm-start.', // 23
  'test/snapshots/snapshots', // 21
  'test/providers-e2e/lifecycle', // 19
  'test/providers/daytona', // 18
  'test/triggers/', // 13
  'test/providers-e2e/orphans', // 13
  'test/agent/proxy', // 11
  'test/core/server', // 11
  'test/chaos/crash-recovery', // 11
  'test/realtime/fleet', // 11
  'test/agent/offload', // 10
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
