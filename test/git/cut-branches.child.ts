// Second process for the concurrency test: prints "ready", waits for "go" on stdin, cuts
// `<prefix>-0 … <prefix>-<count-1>` in parallel and prints one JSON line of outcomes.
import { createInterface } from 'node:readline';
import { createGitService } from '../../resolvers/git/git';

const [url, cacheDir, baseRef, prefix, count] = process.argv.slice(2);
if (!url || !cacheDir || !baseRef || !prefix || !count) {
  throw new Error('usage: cut-branches.child.ts <url> <cacheDir> <baseRef> <prefix> <count>');
}

const service = createGitService({ cacheDir, timeoutMs: 30_000 });
const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
for await (const line of lines) {
  if (line.trim() === 'go') break;
}
lines.close();
const outcomes = await Promise.all(
  Array.from({ length: Number(count) }, (_, index) =>
    service.cutBranch({ url }, baseRef, `${prefix}-${index}`).then(
      ({ commit }) => ({ ok: true, commit }),
      (error: Error) => ({ ok: false, error: `${error.name}: ${error.message}` }),
    ),
  ),
);
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
