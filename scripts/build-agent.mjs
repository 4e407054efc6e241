// Bundles the daemon into one JavaScript file that plain `node` runs (no tsx, no node_modules at run
// time): dist/singulacomp-agent.mjs. The LOCAL provider launches it, and the image's runtime layer
// installs the same file as /usr/local/bin/singulacomp-agent. Settings: scripts/esbuild-settings.mjs.
import { build } from 'esbuild';
import { nodeBundleOptions } from './esbuild-settings.mjs';

const started = Date.now();
await build(
  nodeBundleOptions(new URL('../agent/main.ts', import.meta.url).pathname, {
    outfile: new URL('../dist/singulacomp-agent.mjs', import.meta.url).pathname,
  }),
);
if (process.argv.includes('--verbose'))
  console.log(`dist/singulacomp-agent.mjs built in ${Date.now() - started} ms`);
