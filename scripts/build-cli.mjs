// Bundles the `singulacomp` CLI into one JavaScript file that plain `node` runs (no tsx at run time):
// dist/singulacomp.mjs, beside dist/singulacomp.inputs.json (the source files it was built from).
// `npm run generate` builds it at install; cli/bin.mjs rebuilds it first when any of those sources
// is newer than the bundle. Settings: scripts/esbuild-settings.mjs.
import { mkdirSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { nodeBundleOptions } from './esbuild-settings.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CLI_BUNDLE = fileURLToPath(new URL('../dist/singulacomp.mjs', import.meta.url));
export const CLI_INPUTS = fileURLToPath(new URL('../dist/singulacomp.inputs.json', import.meta.url));

/** Writes a file whole or not at all (concurrent builds each rename a complete file into place). */
function replace(path, data, mtime) {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, data);
  if (mtime) utimesSync(temporary, mtime, mtime);
  renameSync(temporary, path);
}

export async function buildCli() {
  // The bundle is dated when the build began: a source saved while it ran still counts as newer.
  const startedAt = new Date();
  const result = await build(
    nodeBundleOptions('cli/main.ts', {
      absWorkingDir: ROOT,
      write: false,
      metafile: true,
      outfile: CLI_BUNDLE,
    }),
  );
  const output = result.outputFiles[0];
  if (!output) throw new Error('esbuild produced nothing for cli/main.ts');
  mkdirSync(new URL('../dist', import.meta.url), { recursive: true });
  // Sources only: files under node_modules change with `npm install`, which rebuilds anyway.
  const inputs = Object.keys(result.metafile.inputs).filter(
    (path) => !path.includes('node_modules/') && !path.includes(':'),
  );
  replace(CLI_INPUTS, `${JSON.stringify(inputs, null, 2)}\n`);
  replace(CLI_BUNDLE, output.contents, startedAt);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildCli();
