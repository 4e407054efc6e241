// cli/bin.mjs runs the bundled CLI (dist/singulacomp.mjs) on plain node and rebuilds it first when
// a source it was built from is newer, so an edit is never silently ignored.
import { execFile } from 'node:child_process';
import { readFileSync, statSync, utimesSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, test } from 'vitest';

const root = new URL('../../', import.meta.url);
const bundle = new URL('dist/singulacomp.mjs', root);
const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [new URL('cli/bin.mjs', root).pathname, ...args]);

describe('cli/bin.mjs', () => {
  test('runs the bundle without a TypeScript loader and rebuilds it when a source is newer', async () => {
    const help = await run(['--help']);
    expect(help.stdout).toContain('Usage: singulacomp');
    const inputs = JSON.parse(
      readFileSync(new URL('dist/singulacomp.inputs.json', root), 'utf8'),
    ) as string[];
    expect(inputs).toContain('cli/program.ts');
    expect(inputs.some((path) => path.includes('node_modules'))).toBe(false);

    const builtAt = statSync(bundle).mtimeMs;
    await run(['--help']);
    expect(statSync(bundle).mtimeMs, 'a fresh bundle is not rebuilt').toBe(builtAt);

    // A source saved after the build (its content unchanged: only the time matters).
    const source = new URL('cli/env.ts', root);
    const { atime, mtime } = statSync(source);
    const later = new Date(builtAt + 5_000);
    utimesSync(source, later, later);
    try {
      expect((await run(['--help'])).stdout).toContain('Usage: singulacomp');
      expect(statSync(bundle).mtimeMs).toBeGreaterThan(builtAt);
    } finally {
      utimesSync(source, atime, mtime);
    }
  });
});
