// The order test files start in. With three workers the run lasts at least as long as its longest
// file, so the long ones must start first. Vitest orders by the durations it cached from earlier
// runs; a clean clone has none and vitest would fall back to file size, which puts the minutes-long
// end-to-end files (few lines, real OpenCode, real idle timeouts) near the end. Without a complete
// cache, files matching LONG_FIRST start first, in that order, then the rest by size.
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Path prefixes (from the repository root) of the files that take longest, longest first. */
const LONG_FIRST = [
  'test/e2e/daemon-lease.',
  'test/e2e/',
  'test/providers-e2e/',
  'test/agent/reload',
  'test/git/git-service',
  'test/leases/',
  'test/web/dashboard',
  'test/realtime/fleet',
  'test/cli/reload',
  'test/triggers/',
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
